"""CORS for /langgraph/, so a chat UI served from another origin (such as
agent-chat-ui) can call the protocol from the browser. Starlette's ASGI
middleware does the work, around both the SSE consumers and Django; the
allowed origins come from LANGGRAPH_CORS_ALLOWED_ORIGINS (none by default:
no CORS headers at all, so browsers keep other origins out)."""

from __future__ import annotations

from django.conf import settings
from starlette.middleware.cors import CORSMiddleware

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
]
EXPOSE_HEADERS = ["Content-Location", "Location", "X-Pagination-Next", "X-Pagination-Total", "Idempotent-Replayed"]
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
        if self.cors is not None and scope["type"] == "http" and scope["path"].startswith(PREFIX):
            return await self.cors(scope, receive, send)
        return await self.app(scope, receive, send)
