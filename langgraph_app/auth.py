"""Who is calling: the LangGraph SDKs send the API key as `x-api-key`;
`Authorization: Bearer <key>` works as it does under /api/."""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpRequest
from ninja.security import APIKeyHeader

from sessions_app.auth import authenticate_key, bearer_token


def api_key_of(headers: Mapping[str, str]) -> str:
    """`headers` is case-insensitive (Django's) or has lower-case names."""
    raw = (headers.get("x-api-key") or "").strip()
    return raw if raw else bearer_token(headers)


async def authenticate(headers: Mapping[str, str]):
    return await authenticate_key(api_key_of(headers))


class ProtocolAuth(APIKeyHeader):
    """ninja's API-key scheme (so the OpenAPI says `x-api-key`), reading the
    key exactly as the protocol's SSE consumers do."""

    param_name = "x-api-key"
    is_async = True

    async def __call__(self, request: HttpRequest):
        return await authenticate(request.headers)

    def authenticate(self, request: HttpRequest, key: str | None):  # pragma: no cover
        raise NotImplementedError("ProtocolAuth authenticates in __call__")
