"""Plain data passed between the steps of a turn. No Django, no LangGraph:
the graph step, the execution layer and the SSE transport all import this
module and nothing above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID


def checkpoint_thread_id(session_id: Any, epoch: int, turn_id: Any) -> str:
    """Each turn runs on its own checkpoint thread, seeded with the committed
    state. A run that is abandoned, cancelled or fenced off writes only into a
    thread that nothing reads again, and retention can drop whole threads."""
    return f"{session_id}:{epoch}:{turn_id}"


@dataclass(frozen=True)
class Replay:
    """A committed turn answered again from its stored body."""

    turn_id: UUID
    body: str


@dataclass(frozen=True)
class Claim:
    """What a run needs, copied out of the locked rows."""

    first_event: "TurnEvent"  # `turn`, written with the claim
    turn_id: UUID
    session_id: UUID
    epoch: int
    number: int
    base_version: int
    request: dict[str, Any]
    form: list[dict[str, Any]]
    fields: dict[str, Any]
    stage: str
    snapshot: dict[str, Any]
    checkpoint_thread: str | None
    committed_checkpoint_id: str | None

    @property
    def thread_id(self) -> str:
        return checkpoint_thread_id(self.session_id, self.epoch, self.turn_id)


@dataclass(frozen=True)
class Outcome:
    """What a finished run proposes to commit."""

    reply: str
    field_changes: dict[str, Any]
    fields: dict[str, Any]
    stage: str
    snapshot: dict[str, Any]
    checkpoint_id: str | None
    thread_id: str | None = None


@dataclass(frozen=True)
class TurnEvent:
    """One event of a turn's stream; `data` is JSON text."""

    id: int
    event: str
    data: str


TERMINAL_EVENTS = frozenset({"done", "error"})
