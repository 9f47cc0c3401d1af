"""CORS for /langgraph/, so a chat UI served from another origin (such as
agent-chat-ui) can call the protocol from the browser. Starlette's ASGI
middleware does the work, around both the SSE consumers and Django; the
allowed origins come from LANGGRAPH_CORS_ALLOWED_ORIGINS (none by default:
no CORS headers at all, so browsers keep other origins out). A request from
an origin that is not allowed gets no CORS header either: Starlette's
middleware would still expose headers to it, and describe the allowed
methods and headers in the preflight it refuses."""

from __future__ import annotations

from django.conf import settings
from starlette.middleware.cors import CORSMiddleware

from core.errors import ApiError, ErrorCode
from core.http import errors

PREFIX = "/langgraph/"
# What the SDKs send (LangGraph's agent-chat-ui adds X-Auth-Scheme) and read.
ALLOW_HEADERS = [
    "x-api-key",
    "x-auth-scheme",
    "authorization",
    "content-type",
    "last-event-id",
    "prefer",
    "idempotency-key",
    # A browser's MCP client at /langgraph/mcp (docs/agent-protocol.md, "MCP").
    "mcp-protocol-version",
    "mcp-session-id",
]
EXPOSE_HEADERS = [
    "Content-Location",
    "Location",
    "X-Pagination-Next",
    "X-Pagination-Total",
    "Idempotent-Replayed",
    "Mcp-Session-Id",
]
MAX_AGE_SECONDS = 600


class ProtocolCors:
    """ASGI: CORS on /langgraph/ paths, everything else passed through."""

    def __init__(self, app) -> None:
        self.app = app
        origins = settings.LANGGRAPH_CORS_ALLOWED_ORIGINS
        self.cors = (
            CORSMiddleware(
                app,
                allow_origins=origins,
                allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
                allow_headers=ALLOW_HEADERS,
                expose_headers=EXPOSE_HEADERS,
                max_age=MAX_AGE_SECONDS,
            )
            if origins
            else None
        )

    async def __call__(self, scope, receive, send):
        if self.cors is None or scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            return await self.app(scope, receive, send)
        origin = _header(scope, b"origin")
        if origin is None or self.cors.is_allowed_origin(origin):
            return await self.cors(scope, receive, send)
        if scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method") is not None:
            return await _refuse_preflight(send)
        return await self.app(scope, receive, send)


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _refuse_preflight(send) -> None:
    rendered = errors.render(
        ApiError.of(403, ErrorCode.FORBIDDEN, "this origin may not call /langgraph/ from a browser"), errors.PROTOCOL
    )
    body = rendered.content()
    await send(
        {
            "type": "http.response.start",
            "status": rendered.status,
            "headers": [*rendered.asgi_headers(), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
