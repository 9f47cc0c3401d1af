"""A project's own Starlette (or FastAPI) app, `http.app` of its
langgraph.json (AGENT_HTTP_APP), served under /langgraph/ beside the
protocol as langgraph-api serves it at its root (docs/configuration.md,
"Custom routes"):

* its routes come first: a path it defines is its, even one the protocol
  has too, but for /ok, /metrics, /docs and /openapi.json, which stay
  agentsite's (langgraph-api's "unshadowable" routes, its first);
* its middleware runs around the protocol's requests too (langgraph-api's
  default `middleware_order`, middleware_first): agentsite's routes are the
  app's last route, matching whatever its own do not;
* its lifespan runs on the server's event loop, started once the loop runs
  and finished at the stop, since daphne speaks no ASGI lifespan; a request
  for the app waits for its start-up, and a start-up that fails stops the
  server.

The app sees `root_path` "/langgraph" (its routes read as at a server's
root, as the SDK's base URL is); agentsite's routes get the scope back as it
came. It is inside the edge: body bounds, admission and CORS apply."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match

from core.errors import ApiError, ErrorCode
from core.http import errors

logger = logging.getLogger(__name__)

PREFIX = "/langgraph"
# langgraph-api's routes a custom app cannot shadow.
UNSHADOWABLE = frozenset(f"{PREFIX}/{p}" for p in ("ok", "metrics", "docs", "openapi.json"))
ORIGINAL_ROOT = "agentsite.root_path"
HTTP_CODES = {401: ErrorCode.UNAUTHORIZED, 404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}


def _error(request: Request, exc: Exception) -> JSONResponse:
    """The app's errors in the protocol's form, as langgraph-api gives a
    custom app its own handlers for those the app does not handle."""
    if isinstance(exc, HTTPException):
        code = HTTP_CODES.get(exc.status_code, ErrorCode.VALIDATION_ERROR)
        exc = ApiError.of(exc.status_code, code if exc.status_code < 500 else ErrorCode.INTERNAL_ERROR, exc.detail)
    rendered = errors.render(exc, errors.PROTOCOL, where=f"{request.method} {request.url.path}")
    return JSONResponse(rendered.body, rendered.status, headers=dict(rendered.headers))


def _import(spec: str) -> Any:
    where = f"AGENT_HTTP_APP={spec!r}"
    target, colon, attr = spec.rpartition(":")
    if not colon or not target or not attr:
        raise ImproperlyConfigured(f"{where}: use `./path/to/webapp.py:app` or `module:attr`")
    try:
        if "/" in target or target.endswith(".py"):
            file = Path(target).resolve()
            if not file.is_file():
                raise ImproperlyConfigured(f"{where}: no such file {file}")
            module_spec = importlib.util.spec_from_file_location(f"agent_http_app_{abs(hash(str(file)))}", file)
            if module_spec is None or module_spec.loader is None:
                raise ImproperlyConfigured(f"{where}: {file} cannot be imported")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_spec.name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ImproperlyConfigured:
        raise
    except Exception as exc:
        raise ImproperlyConfigured(f"{where} cannot be imported: {exc!r}") from exc
    if not hasattr(module, attr):
        raise ImproperlyConfigured(f"{where}: the module has no {attr!r}")
    app = getattr(module, attr)
    if not isinstance(app, Starlette):
        raise ImproperlyConfigured(f"{where} is not a Starlette or FastAPI application but {type(app).__name__}")
    return app


class _Protocol(BaseRoute):
    """agentsite's routes as one of the app's: its first for `paths`, its
    last for everything its own routes leave."""

    def __init__(self, app, paths: frozenset[str] | None = None) -> None:
        self.app, self.paths = app, paths

    def matches(self, scope) -> tuple[Match, dict]:
        return (Match.FULL if self.paths is None or scope["path"] in self.paths else Match.NONE), {}

    async def handle(self, scope, receive, send) -> None:
        await self.app({**scope, "root_path": scope[ORIGINAL_ROOT]}, receive, send)


class _Lifespan:
    """The app's ASGI lifespan, held open by one task for the server's life."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.state: dict[str, Any] = {}
        self.started = asyncio.Event()
        self.failed: str | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        sent = iter([{"type": "lifespan.startup"}])

        async def receive() -> dict:
            message = next(sent, None)
            if message is not None:
                return message
            await self._stop.wait()
            return {"type": "lifespan.shutdown"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "lifespan.startup.failed":
                # Starlette's message is the traceback: logged whole, told in its last line.
                text = (message.get("message") or "").strip()
                logger.error("http.app's lifespan start-up failed:\n%s", text)
                self.failed = text.splitlines()[-1] if text else "failed"
            if message["type"].startswith("lifespan.startup."):
                self.started.set()
            elif message["type"] == "lifespan.shutdown.failed":
                logger.error("http.app's lifespan shutdown failed: %s", message.get("message"))

        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            # Starlette reports a failed start-up as a message, then raises.
            if not self.started.is_set():
                logger.error("http.app's lifespan start-up failed", exc_info=exc)
                self.failed = repr(exc)
            elif self.failed is None:
                logger.exception("http.app's lifespan failed")
        finally:
            self.started.set()

    async def stop(self) -> None:
        if self._task is None or self._task.done():
            return
        self._stop.set()
        await self._task


class CustomRoutes:
    """ASGI: /langgraph/ requests through the project's app, whose last
    route is agentsite's `protocol`; the rest straight to `protocol`."""

    def __init__(self, app: Starlette, protocol) -> None:
        self.app = app
        self.protocol = protocol
        # A second build (the tests build several) replaces the first's.
        routes = [r for r in app.router.routes if not isinstance(r, _Protocol)]
        app.router.routes = [_Protocol(protocol, UNSHADOWABLE), *routes, _Protocol(protocol)]
        for cls in (HTTPException, Exception):
            app.exception_handlers.setdefault(cls, _error)

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(f"{PREFIX}/"):
            return await self.protocol(scope, receive, send)
        lifespan = _running
        if lifespan is not None:
            await lifespan.started.wait()
        root = scope.get("root_path", "")
        state = dict(lifespan.state) if lifespan is not None else {}
        await self.app({**scope, "root_path": root + PREFIX, ORIGINAL_ROOT: root, "state": state}, receive, send)


@functools.cache
def custom_app() -> Starlette | None:
    """The AGENT_HTTP_APP app, imported once (None when it is not set)."""
    return _import(settings.AGENT_HTTP_APP) if settings.AGENT_HTTP_APP else None


def with_custom_routes(protocol):
    """`protocol` behind the project's app, if there is one."""
    app = custom_app()
    return protocol if app is None else CustomRoutes(app, protocol)


_running: _Lifespan | None = None


async def start_lifespan() -> str | None:
    """Runs the app's lifespan start-up on this loop: None once it is up,
    else why it failed."""
    global _running
    app = custom_app()
    if app is None or _running is not None:
        return None
    _running = _Lifespan(app)
    _running.start()
    await _running.started.wait()
    return _running.failed


async def stop_lifespan() -> None:
    if _running is not None:
        await _running.stop()
