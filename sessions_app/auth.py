"""Who is calling: the API key in `Authorization: Bearer <key>`, read the same
way by the ninja API (`ApiKeyAuth`) and the Channels consumers
(`authenticate`) — or, when AGENT_AUTH_PATH names one, the project's own
`langgraph_sdk.Auth` handler (`custom_auth`). Either way the caller is a
`Principal` whose `owner` scopes every read and write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer

from core.asyncdb import db
from core.errors import Unauthorized
from sessions_app import custom_auth, key_cache
from sessions_app.models import ApiKey
from sessions_app.services import API_KEY_PREFIX, api_key_authenticate, hash_api_key


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: `owner` from an API key's row or the auth handler's
    identity; `permissions` and `user` as the handler returned them (empty
    and None for an API key)."""

    owner: str
    permissions: tuple[str, ...] = ()
    user: Any = None


class AuthedRequest(HttpRequest):
    """A request ApiKeyAuth let in: ninja sets `auth` to what the scheme
    returned. For annotations only."""

    auth: Principal


def bearer_token(headers: Mapping[str, str]) -> str:
    """The key from the Authorization header; `headers` is case-insensitive
    (Django's) or has lower-case names (an ASGI scope's, decoded). A header
    that is there but not `Bearer <key>` is refused with what to send
    instead (never echoing what was sent: it may be a key)."""
    value = (headers.get("authorization") or "").strip()
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    if not value:
        raise Unauthorized()
    if value.startswith(API_KEY_PREFIX):
        raise Unauthorized(f"the Authorization header holds a bare key: send `Authorization: Bearer {API_KEY_PREFIX}…`")
    if scheme.lower() == "bearer":
        raise Unauthorized("the Authorization header says Bearer but carries no key")
    raise Unauthorized("the Authorization header must be `Bearer <key>`")


async def authenticate(headers: Mapping[str, str], scope: Mapping[str, Any] | None = None) -> Principal:
    """`scope` is the ASGI scope the headers came from; the project's auth
    handler (when configured) reads it, the API keys need only the headers."""
    if uses_custom_auth():
        return await authenticate_custom(scope if scope is not None else _scope_of_headers(headers))
    return principal_of(await authenticate_key(bearer_token(headers)))


async def authenticate_custom(scope: Mapping[str, Any]) -> Principal:
    owner, permissions, user = await custom_auth.authenticate(scope)
    return Principal(owner=owner, permissions=permissions, user=user)


def uses_custom_auth() -> bool:
    return custom_auth.configured() is not None


scope_of = custom_auth.scope_of


def principal_of(key: ApiKey) -> Principal:
    return Principal(owner=key.owner)


def _scope_of_headers(headers: Mapping[str, str]) -> dict[str, Any]:
    return {"type": "http", "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]}


async def authenticate_key(raw: str) -> ApiKey:
    """The key's row: from `key_cache` when it was seen valid lately, else
    from the database (and then cached)."""
    cached = key_cache.get(hash_api_key(raw)) if raw and len(raw) <= 200 else None
    if cached is not None:
        return cached
    key = await db(api_key_authenticate, raw=raw)
    key_cache.put(key)
    return key


class ApiKeyAuth(HttpBearer):
    """ninja's bearer scheme (it documents the API's security in OpenAPI),
    reading the key exactly as the consumers do."""

    is_async = True

    async def __call__(self, request: HttpRequest) -> Principal:
        if uses_custom_auth():
            return await authenticate_custom(scope_of(request))
        return await authenticate(request.headers)

    def authenticate(self, request: HttpRequest, token: str) -> Principal:  # pragma: no cover
        raise NotImplementedError("ApiKeyAuth authenticates in __call__")


async def authorize(principal: Principal, resource: str, action: str, value: dict[str, Any]) -> dict[str, Any] | None:
    """The project's resource handler's verdict (docs/configuration.md,
    "Custom auth"): None (allowed, or no custom auth), a metadata filter, or
    a 403 raised."""
    if not uses_custom_auth():
        return None
    return await custom_auth.authorize(
        identity=principal.owner,
        permissions=principal.permissions,
        user=principal.user,
        resource=resource,
        action=action,
        value=value,
    )
