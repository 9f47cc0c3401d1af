"""Who is calling: the API key in `Authorization: Bearer <key>`, read the same
way by the ninja API (`ApiKeyAuth`) and the Channels consumers
(`authenticate`)."""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpRequest
from ninja.security import HttpBearer

from core.asyncdb import db
from core.errors import Unauthorized
from sessions_app import key_cache
from sessions_app.models import ApiKey
from sessions_app.services import API_KEY_PREFIX, api_key_authenticate, hash_api_key


class AuthedRequest(HttpRequest):
    """A request ApiKeyAuth let in: ninja sets `auth` to what the scheme
    returned, the caller's API key. For annotations only."""

    auth: ApiKey


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


async def authenticate(headers: Mapping[str, str]) -> ApiKey:
    return await authenticate_key(bearer_token(headers))


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

    async def __call__(self, request: HttpRequest) -> ApiKey:
        return await authenticate(request.headers)

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey:  # pragma: no cover
        raise NotImplementedError("ApiKeyAuth authenticates in __call__")
