"""Who is calling: the LangGraph SDKs send the API key as `x-api-key`;
`Authorization: Bearer <key>` works as it does under /api/. With
AGENT_AUTH_PATH the project's auth handler decides instead
(sessions_app.auth)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja.security import APIKeyHeader

from sessions_app import auth as session_auth
from sessions_app.auth import (
    Principal,
    authenticate_custom,
    authenticate_key,
    bearer_token,
    principal_of,
    scope_of,
    uses_custom_auth,
)


class AuthedRequest(HttpRequest):
    """A request ProtocolAuth let in: ninja sets `auth` to what the scheme
    returned. For annotations only."""

    auth: Principal


def api_key_of(headers: Mapping[str, str]) -> str:
    """`headers` is case-insensitive (Django's) or has lower-case names. A
    request with no key at all uses AGENT_PROTOCOL_DEFAULT_KEY when that is
    set (docs/configuration.md, "Environment")."""
    raw = (headers.get("x-api-key") or "").strip()
    if raw:
        return raw
    if settings.AGENT_PROTOCOL_DEFAULT_KEY and "authorization" not in headers:
        return settings.AGENT_PROTOCOL_DEFAULT_KEY
    return bearer_token(headers)


async def authenticate(headers: Mapping[str, str], scope: Mapping[str, Any] | None = None) -> Principal:
    """`scope`: the ASGI scope, which the project's auth handler reads."""
    if uses_custom_auth():
        return await session_auth.authenticate(headers, scope)
    return principal_of(await authenticate_key(api_key_of(headers)))


class ProtocolAuth(APIKeyHeader):
    """ninja's API-key scheme (so the OpenAPI says `x-api-key`), reading the
    key exactly as the protocol's SSE consumers do."""

    param_name = "x-api-key"
    is_async = True

    async def __call__(self, request: HttpRequest) -> Principal:
        if uses_custom_auth():
            return await authenticate_custom(scope_of(request))
        return await authenticate(request.headers)

    def authenticate(self, request: HttpRequest, key: str | None) -> Principal:  # pragma: no cover
        raise NotImplementedError("ProtocolAuth authenticates in __call__")
