"""What a client's request means to a claim: its `Idempotency-Key`, checked,
and the digest that tells a retry from a different request under the same
key (docs/turn-protocol.md, "Idempotency")."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from core.errors import InvalidIdempotencyKey

IDEMPOTENCY_KEY_MAX = 128


def check_idempotency_key(raw: str | None) -> str | None:
    if raw is None:
        return None
    # Visible ASCII only: the key is echoed in logs and compared byte for byte.
    if not (1 <= len(raw) <= IDEMPOTENCY_KEY_MAX) or not all(33 <= ord(c) <= 126 for c in raw):
        raise InvalidIdempotencyKey()
    return raw


def request_digest(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
