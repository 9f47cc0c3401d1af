"""The sessions this process has seen exist: a hint for how a claim starts,
never for what it decides.

A chat on a key this process has not seen is most often a new session's
first turn, so its claim first tries to create the session holding that
turn, in one round trip (`turn_claim`); when the key turns out to exist,
that insert does nothing and the claim locks the session as usual, one
round trip later. A key seen here goes straight to the lock. A wrong hint
costs a round trip, never a wrong answer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

# (owner, key) pairs remembered, the least recently used forgotten first:
# a few MB at most, for keys of the longest allowed length.
MAX_KNOWN = 10_000

_known: OrderedDict[tuple[str, str], None] = OrderedDict()
_lock = threading.Lock()


def seen(owner: str, key: str) -> bool:
    with _lock:
        if (owner, key) in _known:
            _known.move_to_end((owner, key))
            return True
        return False


def remember(owner: str, key: str) -> None:
    with _lock:
        _known[(owner, key)] = None
        _known.move_to_end((owner, key))
        while len(_known) > MAX_KNOWN:
            _known.popitem(last=False)


def forget_all() -> None:
    with _lock:
        _known.clear()
