"""API keys are cached briefly per process (docs/scale.md, "Round trips":
no key lookup per turn), and revocation still works: at once here, within the cache's
lifetime from anywhere else."""

from __future__ import annotations

import asyncio

import pytest
from django.utils import timezone

from sessions_app import key_cache
from sessions_app.models import ApiKey
from sessions_app.services import api_key_create, api_key_revoke
from tests.fixtures.runners import orm

pytestmark = pytest.mark.django_db(transaction=True)


def revoke_elsewhere(raw: str) -> None:
    """What another process (the admin, revoke_api_key, another server) does:
    the row changes; this process's cache does not hear of it."""
    from sessions_app.services import hash_api_key

    ApiKey.objects.filter(key_hash=hash_api_key(raw)).update(revoked_at=timezone.now())


async def status(api) -> int:
    return (await api.call("GET", "/sessions")).status_code


async def test_a_key_seen_valid_is_trusted_for_the_cache_lifetime(settings, api, alice):
    settings.AGENT_API_KEY_CACHE_SECONDS = 0.5
    assert await status(api) == 200
    await orm(revoke_elsewhere, raw=alice)
    assert await status(api) == 200  # from the cache: no lookup
    await asyncio.sleep(0.6)
    assert await status(api) == 401


async def test_without_a_cache_every_request_asks_the_database(settings, api, alice):
    settings.AGENT_API_KEY_CACHE_SECONDS = 0
    assert await status(api) == 200
    await orm(revoke_elsewhere, raw=alice)
    assert await status(api) == 401


async def test_revoking_in_this_process_takes_effect_at_once(settings, api, alice):
    settings.AGENT_API_KEY_CACHE_SECONDS = 60
    assert await status(api) == 200
    from sessions_app.services import hash_api_key

    key = await orm(lambda: ApiKey.objects.get(key_hash=hash_api_key(alice)))
    await orm(api_key_revoke, api_key=key)
    assert await status(api) == 401


async def test_unknown_keys_are_not_cached_and_the_cache_is_bounded(settings, api):
    settings.AGENT_API_KEY_CACHE_SECONDS = 60
    api.key = "ak_made_up"
    assert await status(api) == 401
    assert key_cache.get("anything") is None and len(key_cache._keys) == 0
    keys = await orm(lambda: [api_key_create(owner=f"o{i}")[0] for i in range(5)])
    for key in keys:
        key_cache.put(key)
    assert len(key_cache._keys) == 5
    original = key_cache.MAX_KEYS
    key_cache.MAX_KEYS = 3
    try:
        key_cache.put(keys[0])
        assert len(key_cache._keys) == 3 and key_cache.get(keys[0].key_hash) is keys[0]
        assert key_cache.get(keys[1].key_hash) is None  # least recently used went first
    finally:
        key_cache.MAX_KEYS = original
