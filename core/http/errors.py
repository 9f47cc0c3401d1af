"""The one front door for errors (docs/api.md, "Errors"). Every edge — both
NinjaAPIs, both dialects' SSE consumers, the ASGI edge, the server guard,
plain Django views — turns what went wrong into a response here, and
nowhere else builds an error body (tests/api/test_error_front_door.py).

Any exception becomes an `ApiError` (`error_of`): ninja's validation,
authentication and HTTP errors, Django's RequestDataTooBig, a storage error
(503, logged as a warning), anything else (500, logged with its traceback).
That error is rendered in one of two dialects:

    API        /api/        {"error": {"code", "message"[, "details"]}}
    PROTOCOL   /langgraph/  {"detail", "code"[, "details"]}, with the
                            statuses LangGraph's SDKs expect (412 is 409)

with `Retry-After` when the error's class says when to come back
(`ApiError.retry_after`: a busy session, the session quota, storage
unavailable, a server shutting down), and `WWW-Authenticate: Bearer` on
every 401.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja.errors import AuthenticationError, HttpError, ValidationError

from core.asyncdb import is_storage_error
from core.errors import (
    ApiError,
    ErrorCode,
    InternalError,
    MalformedRequest,
    PayloadTooLarge,
    StorageUnavailable,
    Unauthorized,
)
from core.http.bodies import validation_failed

if TYPE_CHECKING:
    from ninja import NinjaAPI

logger = logging.getLogger(__name__)

JSON = (b"content-type", b"application/json; charset=utf-8")


def _api_body(error: ApiError) -> dict[str, Any]:
    return {"error": _event_body(error)}


def _protocol_body(error: ApiError) -> dict[str, Any]:
    # LangGraph's server answers {"detail": message} (what the SDKs read);
    # `code` is ours, machine-readable.
    body: dict[str, Any] = {"detail": error.message, "code": str(error.code)}
    if error.details is not None:
        body["details"] = error.details
    return body


def _event_body(error: ApiError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": str(error.code), "message": error.message}
    if error.details is not None:
        body["details"] = error.details
    return body


@dataclass(frozen=True)
class Dialect:
    name: str
    body: Callable[[ApiError], dict[str, Any]]
    # The body's JSON Schema, for the OpenAPI documents.
    schema: dict[str, Any]
    # Statuses the clients of this dialect expect instead of ours.
    statuses: dict[int, int] = field(default_factory=dict)


API = Dialect(
    "api",
    _api_body,
    {
        "title": "Error",
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "enum": [str(code) for code in ErrorCode]},
                    "message": {"type": "string"},
                    "details": {},
                },
            }
        },
    },
)
PROTOCOL = Dialect(
    "langgraph",
    _protocol_body,
    {"type": "object", "properties": {"detail": {"type": "string"}, "code": {"type": "string"}}},
    # The SDKs map 409 to a conflict and 412 to nothing.
    statuses={412: 409},
)


@dataclass(frozen=True)
class Rendered:
    """An error as a response: status, JSON body, extra headers."""

    status: int
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()

    def content(self) -> bytes:
        return json.dumps(self.body, ensure_ascii=False).encode()

    def asgi_headers(self) -> list[tuple[bytes, bytes]]:
        """Content-Type and the extra headers, as ASGI wants them."""
        return [JSON, *((name.lower().encode(), value.encode()) for name, value in self.headers)]


def error_of(exc: BaseException, *, where: str = "") -> ApiError:
    """What the client is told of `exc`. `where` (method and path) goes
    into the log line of an unexpected error."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ValidationError):
        return validation_failed(exc.errors)
    if isinstance(exc, AuthenticationError):
        return Unauthorized()
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, HttpError):
        # ninja wraps what the parser raised (docs/field-notes.md, "Learned while building").
        if isinstance(exc.__cause__, (ApiError, RequestDataTooBig)):
            return error_of(exc.__cause__, where=where)
        if exc.status_code == 400:
            return MalformedRequest()
        return ApiError.of(exc.status_code, ErrorCode.VALIDATION_ERROR, str(exc))
    if is_storage_error(exc):
        logger.warning("storage unavailable: %r", exc)
        return StorageUnavailable()
    logger.error("unhandled error on %s", where or "a request", exc_info=exc)
    return InternalError()


def render(exc: BaseException, dialect: Dialect = API, *, where: str = "") -> Rendered:
    error = error_of(exc, where=where)
    status = dialect.statuses.get(error.status, error.status)
    headers: tuple[tuple[str, str], ...] = ()
    if error.retry_after is not None:
        headers += (("Retry-After", str(error.retry_after)),)
    if status == 401:
        # A 401 must name the scheme that gets in (RFC 9110, 11.6.1); both
        # dialects take `Authorization: Bearer <key>`.
        headers += (("WWW-Authenticate", "Bearer"),)
    return Rendered(status, dialect.body(error), headers)


def response(exc: BaseException, dialect: Dialect = API, *, request: HttpRequest | None = None) -> HttpResponse:
    """A Django response, for views outside a NinjaAPI (and the installer's handlers)."""
    rendered = render(exc, dialect, where=_where(request))
    answer = JsonResponse(rendered.body, status=rendered.status, json_dumps_params={"ensure_ascii": False})
    for name, value in rendered.headers:
        answer[name] = value
    return answer


def _where(request: HttpRequest | None) -> str:
    return f"{request.method} {request.path}" if request is not None else ""


# What a NinjaAPI would otherwise answer in its own shape (ninja installs
# handlers for ValidationError, HttpError — AuthenticationError is one — and
# Exception; the others are named so the lookup by class finds ours first).
HANDLED = (ApiError, ValidationError, AuthenticationError, HttpError, RequestDataTooBig, Exception)


def install(api: NinjaAPI, dialect: Dialect) -> None:
    """Every error `api` answers goes through the front door, in `dialect`."""

    def handle(request: HttpRequest, exc: Exception) -> HttpResponse:
        rendered = render(exc, dialect, where=_where(request))
        answer = api.create_response(request, rendered.body, status=rendered.status)
        for name, value in rendered.headers:
            answer[name] = value
        return answer

    for cls in HANDLED:
        # ninja types a handler's exception as `Exc | type[Exc]`; it only
        # ever passes the exception raised.
        api.add_exception_handler(cls, handle)  # type: ignore[arg-type]


def event_data(error: ApiError) -> str:
    """A turn's `error` event (and its stored final event): /api/'s error
    object without the envelope, as JSON text."""
    return json.dumps(_event_body(error), ensure_ascii=False)


def run_error(code: str | None, message: str | None) -> dict[str, Any]:
    """A failed run as the protocol reports it: the SSE `error` event's data,
    and `__error__` in a wait/join answer."""
    return {"error": code or str(ErrorCode.INTERNAL_ERROR), "message": message or "the run failed"}


def command_error(command_id: Any, error: str, message: str, code: str | None = None) -> dict[str, Any]:
    """A thread-stream command that failed, as LangGraph's protocol answers it
    (`{"type": "error", "id", "error", "message"}`, `error` one of its
    codes), with the protocol dialect's `detail` and, where there is one,
    our `code` beside it (docs/agent-protocol.md, "Thread streams")."""
    body: dict[str, Any] = {"type": "error", "id": command_id, "error": error, "message": message, "detail": message}
    if code is not None:
        body["code"] = code
    return body
