"""The NinjaAPI: routers, bearer auth, and the one error contract
`{"error": {"code", "message"}}` (core.errors) for everything it serves."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.openapi.docs import Swagger
from ninja.parser import Parser

from core.asyncdb import is_storage_error
from core.errors import (
    ApiError,
    InternalError,
    MalformedRequest,
    PayloadTooLarge,
    StorageUnavailable,
    Unauthorized,
)
from core.http.bodies import parse_json, validation_failed
from agentsite.openapi import document
from sessions_app.auth import ApiKeyAuth

logger = logging.getLogger(__name__)


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
    description="Durable LangGraph chat sessions. Errors are `{\"error\": {\"code\", \"message\"}}`.",
    auth=ApiKeyAuth(),
    urls_namespace="api",
)


def error_response(request: HttpRequest, error: ApiError) -> HttpResponse:
    return api.create_response(request, error.as_dict(), status=error.status)


@api.exception_handler(ApiError)
def on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return error_response(request, exc)


@api.exception_handler(ValidationError)
def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    return error_response(request, validation_failed(exc.errors))


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(request, Unauthorized())


@api.exception_handler(RequestDataTooBig)
def on_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return error_response(request, PayloadTooLarge())


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja wraps what the parser raised (FIELD-NOTES).
    if isinstance(exc.__cause__, ApiError):
        return error_response(request, exc.__cause__)
    if isinstance(exc.__cause__, RequestDataTooBig):
        return error_response(request, PayloadTooLarge())
    if exc.status_code == 400:
        return error_response(request, MalformedRequest())
    error = ApiError(str(exc))
    error.status = exc.status_code
    return error_response(request, error)


@api.exception_handler(Exception)
def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    if is_storage_error(exc):
        logger.warning("storage unavailable: %r", exc)
        return error_response(request, StorageUnavailable())
    logger.exception("unhandled error on %s %s", request.method, request.path)
    return error_response(request, InternalError())


api.add_router("/sessions", "sessions_app.api.router")
api.add_router("/sessions", "turns_app.api.router")
api.add_router("", "turns_app.health.router")
api.add_router("", "turns_app.api.graphs_router")
