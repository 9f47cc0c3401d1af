"""A project's own authentication: the `langgraph_sdk.Auth` object that
AGENT_AUTH_PATH names (`./src/auth.py:auth` or `module:attr`, as
langgraph.json's `auth.path`), whose `@auth.authenticate` handler decides who
calls instead of the API keys (docs/configuration.md, "Custom auth").

The handler gets the parameters it names, as LangGraph's server passes them:
`request` (a Starlette request, HTTP only), `headers` (bytes to bytes),
`authorization`, `path`, `method`, `query_params`, `path_params`, `scope`.
Its answer (a string, or anything with an `identity`, a dict with one, a
`(permissions, user)` pair) becomes the caller: the identity is the owner.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from langgraph_sdk import Auth

from core.errors import ApiError, ErrorCode, InternalError, Unauthorized

logger = logging.getLogger(__name__)

# The owner column's width (sessions_app.models): a longer identity is refused
# rather than failing the write it would own.
MAX_IDENTITY = 150
PARAMETERS = frozenset(
    {"request", "headers", "authorization", "path", "method", "query_params", "path_params", "scope", "body", "user"}
)
# What LangGraph's server calls a WebSocket handshake's method.
WEBSOCKET_METHOD = "WEBSOCKET"


def _import_target(path: str) -> Any:
    module_name, sep, attr = path.rpartition(":")
    if not sep or not module_name or not attr:
        raise ImproperlyConfigured(f"AGENT_AUTH_PATH={path!r}: use `./path/to/auth.py:auth` or `module:attr`")
    try:
        if "/" in module_name or module_name.endswith(".py"):
            file = Path(module_name).resolve()
            spec = importlib.util.spec_from_file_location(f"agent_auth_{abs(hash(str(file)))}", file)
            if spec is None or spec.loader is None or not file.is_file():
                raise ImproperlyConfigured(f"AGENT_AUTH_PATH={path!r}: no such file {file}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImproperlyConfigured:
        raise
    except Exception as exc:
        raise ImproperlyConfigured(f"AGENT_AUTH_PATH={path!r} cannot be imported: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ImproperlyConfigured(f"AGENT_AUTH_PATH={path!r}: the module has no {attr!r}") from None


@functools.cache
def configured() -> tuple[Auth, Callable[..., Any], frozenset[str]] | None:
    """The Auth object, its authenticate handler and the parameters it names;
    None when AGENT_AUTH_PATH is empty (the API keys authenticate)."""
    path = settings.AGENT_AUTH_PATH
    if not path:
        return None
    auth = _import_target(path)
    if not isinstance(auth, Auth):
        raise ImproperlyConfigured(f"AGENT_AUTH_PATH={path!r} is a {type(auth).__name__}, not a langgraph_sdk.Auth")
    handler = auth._authenticate_handler
    if handler is None:
        raise ImproperlyConfigured(f"AGENT_AUTH_PATH={path!r}: the Auth object has no @auth.authenticate handler")
    names = frozenset(inspect.signature(handler).parameters)
    unknown = sorted(names - PARAMETERS)
    if unknown:
        raise ImproperlyConfigured(
            f"AGENT_AUTH_PATH={path!r}: the authenticate handler asks for {', '.join(unknown)}; "
            f"it may name {', '.join(sorted(PARAMETERS))}"
        )
    return auth, handler, names


def scope_of(request: HttpRequest) -> dict[str, Any]:
    """The ASGI scope Django's request came from (daphne), or one made from
    its META (a WSGI or test-client request)."""
    scope = getattr(request, "scope", None)
    if scope is not None:
        return scope
    headers = [
        (name[5:].replace("_", "-").lower().encode("latin-1"), str(value).encode("latin-1"))
        for name, value in request.META.items()
        if name.startswith("HTTP_")
    ]
    return {
        "type": "http",
        "method": request.method,
        "path": request.path,
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
    }


def _arguments(scope: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    from starlette.datastructures import QueryParams
    from starlette.requests import Request

    raw_headers = list(scope.get("headers", []))
    headers = {name.lower(): value for name, value in raw_headers}
    websocket = scope.get("type") == "websocket"
    values: dict[str, Any] = {
        "scope": scope,
        "path": scope.get("path", ""),
        "method": WEBSOCKET_METHOD if websocket else scope.get("method", ""),
        "headers": headers,
        "authorization": headers[b"authorization"].decode("latin-1") if b"authorization" in headers else None,
        "query_params": QueryParams(scope.get("query_string", b"")),
        "path_params": dict(scope.get("url_route", {}).get("kwargs", {})),
        "body": None,
        "user": None,
    }
    if "request" in names:
        if websocket:
            raise ApiError.of(
                403, ErrorCode.FORBIDDEN, "the auth handler asks for `request`, which a WebSocket has not"
            )
        values["request"] = Request(dict(scope))
    return {name: values[name] for name in names}


def identity_of(answer: Any) -> tuple[str, tuple[str, ...], Any]:
    """(identity, permissions, user) from what the handler returned, read as
    LangGraph's server reads it."""
    permissions: Any = ()
    user = answer
    if isinstance(answer, tuple) and len(answer) == 2:
        permissions, user = answer
    elif isinstance(answer, Mapping):
        permissions = answer.get("permissions", ())
    elif hasattr(answer, "permissions"):
        permissions = answer.permissions
    if isinstance(user, str):
        identity: Any = user
    elif isinstance(user, Mapping):
        identity = user.get("identity")
    else:
        identity = getattr(user, "identity", None)
    if not isinstance(identity, str) or not identity.strip() or len(identity) > MAX_IDENTITY:
        raise TypeError(f"the handler returned no usable identity (a string of 1 to {MAX_IDENTITY} characters)")
    return identity, tuple(str(p) for p in permissions or ()), user


async def authenticate(scope: Mapping[str, Any]) -> tuple[str, tuple[str, ...], Any]:
    """The caller by the project's handler. Its HTTPException keeps its
    status (a 4xx; anything else is read as 401); any other failure is a 401
    `auth_failed`, logged, never a 500."""
    setup = configured()
    assert setup is not None
    _, handler, names = setup
    try:
        answer = handler(**_arguments(scope, names))
        if inspect.isawaitable(answer):
            answer = await answer
        return identity_of(answer)
    except ApiError:
        raise
    except Auth.exceptions.HTTPException as exc:
        status = exc.status_code if 400 <= exc.status_code < 500 else 401
        code = {401: ErrorCode.UNAUTHORIZED, 403: ErrorCode.FORBIDDEN}.get(status, ErrorCode.AUTH_FAILED)
        raise ApiError.of(status, code, str(exc.detail or "refused by the auth handler")) from None
    except Exception:
        logger.exception("the AGENT_AUTH_PATH authenticate handler failed")
        error = Unauthorized("the auth handler could not authenticate this request")
        error.code = ErrorCode.AUTH_FAILED
        raise error from None


class _User(dict):
    """What a resource handler sees as `ctx.user`: the authenticate
    handler's user, by attribute (`ctx.user.identity`) and by key."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _user_of(identity: str, permissions: tuple[str, ...], user: Any) -> _User:
    fields = dict(user) if isinstance(user, Mapping) else {}
    if not isinstance(user, (str, Mapping)) and user is not None:
        fields |= {k: v for k, v in vars(user).items() if not k.startswith("_")} if hasattr(user, "__dict__") else {}
    return _User({"is_authenticated": True, "display_name": identity, **fields, "identity": identity})


def handler_for(auth: Auth, resource: str, action: str) -> Callable[..., Any] | None:
    """The handler LangGraph's server runs for `resource.action`: the last
    one registered for it, else for the resource (`@auth.on.threads`), the
    action (`@auth.on(actions=…)`), both wildcards, and last `@auth.on`
    (langgraph_api.auth.custom._get_handler; langgraph_sdk keeps the
    registry, not a lookup)."""
    for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
        if auth._handlers.get(key):
            return auth._handlers[key][-1]
    return auth._global_handlers[-1] if auth._global_handlers else None


async def authorize(
    *, identity: str, permissions: tuple[str, ...], user: Any, resource: str, action: str, value: dict[str, Any]
) -> dict[str, Any] | None:
    """The project's handler's verdict on `resource.action` (docs/configuration.md,
    "Custom auth"), as LangGraph's server reads it: None or True allow;
    a dict is a metadata filter; False, or an `assert` failing in the
    handler, is a 403; its HTTPException keeps its status; a ValueError is
    a 400; anything else it raises or returns is a 500, logged. `value`
    may be changed in place (a stamped owner, a rewritten namespace)."""
    setup = configured()
    if setup is None:
        return None
    handler = handler_for(setup[0], resource, action)
    if handler is None:
        return None
    from langgraph_sdk.auth.types import AuthContext

    ctx = AuthContext(
        permissions=list(permissions),
        user=_user_of(identity, permissions, user),
        resource=resource,  # type: ignore[arg-type]
        action=action,  # type: ignore[arg-type]
    )
    what = f"{resource}.{action}"
    try:
        answer: Any = await handler(ctx=ctx, value=value)
    except Auth.exceptions.HTTPException as exc:
        code = {401: ErrorCode.UNAUTHORIZED, 403: ErrorCode.FORBIDDEN}.get(exc.status_code, ErrorCode.AUTH_FAILED)
        if exc.status_code >= 500:
            code = ErrorCode.INTERNAL_ERROR
        status = exc.status_code if 400 <= exc.status_code < 600 else 403
        raise ApiError.of(status, code, str(exc.detail or f"the auth handler refused {what}")) from None
    except AssertionError as exc:
        raise ApiError.of(403, ErrorCode.FORBIDDEN, str(exc) or f"the auth handler refused {what}") from None
    except ValueError as exc:
        logger.warning("the AGENT_AUTH_PATH %s handler raised %r", what, exc)
        raise ApiError.of(400, ErrorCode.VALIDATION_ERROR, str(exc) or f"the auth handler refused {what}") from None
    except Exception:
        logger.exception("the AGENT_AUTH_PATH %s handler failed", what)
        raise InternalError(f"the auth handler failed on {what}") from None
    if answer is None or answer is True:
        return None
    if answer is False:
        raise ApiError.of(403, ErrorCode.FORBIDDEN, "Forbidden")
    if not isinstance(answer, dict):
        logger.error("the AGENT_AUTH_PATH %s handler returned a %s", what, type(answer).__name__)
        raise InternalError(
            f"Auth handler returned invalid result. Expected filter dict, None, or boolean. Got {type(answer)} instead."
        )
    return answer
