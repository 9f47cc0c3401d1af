"""API keys recently seen valid, per process, for AGENT_API_KEY_CACHE_SECONDS:
a turn then costs no key lookup (a round trip and a thread hop each time,
docs/scale.md). Bounded (least recently used go first); only valid keys are
kept, so a client cycling made-up keys cannot grow it.

A key revoked in this process is dropped at once; revoked elsewhere (the
admin, `manage.py revoke_api_key`, another server), it keeps working here
for at most the cache's lifetime — the price of not asking the database on
every request, documented in (docs/operations.md, "API keys")."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    from sessions_app.models import ApiKey

MAX_KEYS = 1024

_lock = threading.Lock()
_keys: OrderedDict[str, tuple[float, ApiKey]] = OrderedDict()


def get(key_hash: str) -> ApiKey | None:
    with _lock:
        entry = _keys.get(key_hash)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del _keys[key_hash]
            return None
        _keys.move_to_end(key_hash)
        return entry[1]


def put(key: ApiKey) -> None:
    lifetime = settings.AGENT_API_KEY_CACHE_SECONDS
    if lifetime <= 0:
        return
    with _lock:
        _keys[key.key_hash] = (time.monotonic() + lifetime, key)
        _keys.move_to_end(key.key_hash)
        while len(_keys) > MAX_KEYS:
            _keys.popitem(last=False)


def forget(key_hash: str) -> None:
    with _lock:
        _keys.pop(key_hash, None)


def clear() -> None:
    with _lock:
        _keys.clear()
