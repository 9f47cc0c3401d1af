"""API keys: created (the raw key shown once, only its hash stored),
authenticated, revoked. Revoking also drops the key from this process's
cache (sessions_app.key_cache)."""

from __future__ import annotations

import hashlib
import secrets

from django.utils import timezone

from core.errors import Unauthorized, ValidationFailed
from sessions_app import key_cache
from sessions_app.models import ApiKey

API_KEY_PREFIX = "ask_"


def hash_api_key(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_key_create(*, owner: str) -> tuple[ApiKey, str]:
    """Returns the row and the raw key; the raw key is not stored anywhere."""
    owner = (owner or "").strip()
    if not owner or len(owner) > 150:
        raise ValidationFailed("the owner name must be 1-150 characters")
    prefix = secrets.token_hex(4)
    raw = f"{API_KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(owner=owner, prefix=prefix, key_hash=hash_api_key(raw))
    return key, raw


def api_key_authenticate(*, raw: str) -> ApiKey:
    if not raw or len(raw) > 200:
        raise Unauthorized()
    try:
        key = ApiKey.objects.get(key_hash=hash_api_key(raw), revoked_at__isnull=True)
    except ApiKey.DoesNotExist:
        raise Unauthorized() from None
    now = timezone.now()
    # One write a minute at most: last_used_at is for operators, not a hot path.
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    key_cache.forget(api_key.key_hash)
    return api_key
