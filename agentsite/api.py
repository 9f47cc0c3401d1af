"""The NinjaAPI: routers, bearer auth, and the one error contract
`{"error": {"code", "message"}}` for everything it serves (rendered by the
front door, core.http.errors)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.openapi.docs import Swagger
from ninja.parser import Parser

from agentsite.openapi import document
from core.http import errors
from core.http.bodies import parse_json
from sessions_app.auth import ApiKeyAuth


class JsonParser(Parser):
    def parse_body(self, request: HttpRequest) -> Any:
        return parse_json(request.body)


# /api/docs shares its origin with the chat page, whose API key sits in
# sessionStorage: only this origin's own scripts may run there (Swagger UI's
# assets come from ninja's static files, "ninja" being an installed app).
DOCS_CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        # Swagger UI sets style attributes and draws data: SVG icons.
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)


class SelfHostedSwagger(Swagger):
    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        response = super().render_page(request, api, **kwargs)
        response["Content-Security-Policy"] = DOCS_CSP
        return response


class DocumentedApi(NinjaAPI):
    """ninja's schema plus what it cannot know (agentsite.openapi)."""

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        return document(schema)


api = DocumentedApi(
    docs=SelfHostedSwagger(),
    parser=JsonParser(),
    title="agentsite",
    version="1.0",
    description='Durable LangGraph chat sessions. Errors are `{"error": {"code", "message"}}`.',
    auth=ApiKeyAuth(),
    urls_namespace="api",
)


errors.install(api, errors.API)

api.add_router("/sessions", "sessions_app.api.router")
api.add_router("/sessions", "turns_app.api.router")
api.add_router("", "turns_app.health.router")
api.add_router("", "turns_app.api.graphs_router")
