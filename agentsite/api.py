"""The NinjaAPI: routers, bearer auth, and the single exception contract
`{"error": {"code", "message"}}`."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from agentsite.asyncdb import db, is_storage_error
from agentsite.errors import (
    ApiError,
    InternalError,
    MalformedRequest,
    StorageUnavailable,
    Unauthorized,
    ValidationFailed,
)
from sessions_app.models import ApiKey
from sessions_app.services import api_key_authenticate

logger = logging.getLogger(__name__)


class ApiKeyAuth(HttpBearer):
    # Async so the lookup goes through db(), which owns its connection's
    # lifetime; ninja awaits authenticate() when `is_async` is set.
    is_async = True

    async def authenticate(self, request: HttpRequest, token: str) -> ApiKey:
        return await db(api_key_authenticate, raw=token.strip())


def reject_nul(data: Any, where: str = "body") -> None:
    """PostgreSQL cannot store U+0000 in text or jsonb (SQLite can): refuse it
    at the door, the same way on both, instead of failing at the write."""
    if isinstance(data, str):
        if "\x00" in data:
            raise ValidationFailed(f"{where}: the NUL character (U+0000) is not allowed")
    elif isinstance(data, dict):
        for key, value in data.items():
            reject_nul(key, where)
            reject_nul(value, f"{where}.{key}")
    elif isinstance(data, list):
        for index, value in enumerate(data):
            reject_nul(value, f"{where}[{index}]")


class JsonParser(Parser):
    def parse_body(self, request: HttpRequest) -> Any:
        data = json.loads(request.body)
        reject_nul(data)
        return data


api = NinjaAPI(
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
    details = [
        {"loc": [str(p) for p in e.get("loc", ())], "message": e.get("msg", "invalid")}
        for e in exc.errors
    ]
    first = details[0] if details else {"loc": [], "message": "invalid request"}
    where = ".".join(p for p in first["loc"] if p not in {"body", "payload"}) or "request"
    return error_response(
        request, ValidationFailed(f"{where}: {first['message']}", details=details)
    )


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(request, Unauthorized())


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, ApiError):  # raised by JsonParser, wrapped by ninja
        return error_response(request, exc.__cause__)
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
api.add_router("", "agentsite.health.router")
