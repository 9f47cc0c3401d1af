"""Side effects of a turn's tools, once.

**Database effects.** A tool never writes business rows while the graph
runs: it records an effect (`record(kind, payload)`), and the turn's commit
applies the recorded effects inside its own transaction, fenced like the
rest of the commit. So a committed turn's effects happen exactly once, and
an aborted, fenced, cancelled or replayed turn's never. An app says what an
effect kind does with `register(kind, apply)` (in its `AppConfig.ready`);
`apply(payload, turn)` runs in the commit's transaction and returns what the
turn reports (it must not commit). It may refuse: it raises `EffectRefused`
(its message says why; a lock it takes, such as `select_for_update` on the
row its check reads, holds until the commit ends, so a check made there is
one no concurrent commit slips past), the commit rolls back, and the turn
fails with 409 `effect_refused` and nothing of it lands — a pause the turn
answered still waits. Any other exception fails the turn as a server error.

**Outside calls.** A call to another service cannot join our transaction.
`effect_key()` gives it a key to deduplicate on: the same when the client
retries the same request — same session, epoch and Idempotency-Key, same
position of the call in the turn — so a retry after a crash between the call
and the commit presents the same key and the service does the work once.
That holds only if the service honours the key, the client retries with the
same Idempotency-Key, and the graph makes the same calls in the same order
on the retry (true for deterministic graphs; a model may choose differently).
Without an Idempotency-Key the key is the turn's own and a retry gets a new
one.
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from core.errors import EffectRefused as EffectRefused  # what an `apply` raises to refuse

Apply = Callable[[dict[str, Any], "TurnContext"], dict[str, Any]]

_handlers: dict[str, Apply] = {}


class EffectError(RuntimeError):
    """A tool recorded an effect nobody registered, or one outside a turn."""


@dataclass
class TurnContext:
    """The turn a graph runs for, as tools see it."""

    session_id: UUID
    epoch: int
    turn_id: UUID
    idempotency_key: str | None
    recorded: list[dict[str, Any]] = field(default_factory=list)
    # Whose turn it is: the store's namespaces are the owner's
    # (graphs.runtime.store); None where no one asked (a commit's context).
    owner: str | None = None
    # The store's writes this turn staged, for the turn's own reads to see
    # (graphs.runtime.store.TurnStore keeps it).
    staged: Any = None
    _keys_issued: int = 0

    def key(self, purpose: str) -> str:
        self._keys_issued += 1
        basis = self.idempotency_key if self.idempotency_key is not None else f"turn:{self.turn_id}"
        raw = f"{self.session_id}:{self.epoch}:{basis}:{self._keys_issued}:{purpose}"
        return hashlib.sha256(raw.encode()).hexdigest()[:40]


_current: contextvars.ContextVar[TurnContext | None] = contextvars.ContextVar("agentsite_turn", default=None)


@contextmanager
def running(context: TurnContext) -> Iterator[TurnContext]:
    """The runner sets this around a graph run; LangGraph copies the context
    into every node and tool it runs."""
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def current_or_none() -> TurnContext | None:
    return _current.get()


def current() -> TurnContext:
    context = _current.get()
    if context is None:
        raise EffectError("effects can only be recorded while agentsite runs a turn")
    return context


def register(kind: str, apply: Apply) -> None:
    _handlers[kind] = apply


def record(kind: str, payload: dict[str, Any]) -> None:
    """Record a database effect for the commit to apply."""
    if kind not in _handlers:
        raise EffectError(f"no handler is registered for the effect {kind!r}")
    current().recorded.append({"kind": kind, "payload": payload})


def effect_key(purpose: str = "") -> str:
    """A key for an outside call, stable across retries of the same request."""
    return current().key(purpose)


def apply_all(effects: list[dict[str, Any]], context: TurnContext) -> list[dict[str, Any]]:
    """Inside the commit's transaction: apply each recorded effect, in order;
    what the turn reports."""
    return [
        {"kind": effect["kind"], "result": _handlers[effect["kind"]](effect["payload"], context)} for effect in effects
    ]
