"""Plain data passed between the steps of a turn. No Django, no LangGraph:
the graph step, the execution layer and the SSE transport all import this
module and nothing above it."""

from __future__ import annotations

from dataclasses import dataclass, field
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
class StartFrom:
    """A committed state a turn starts from instead of the session's
    current one: just after `turn_id` (None: the start) at session
    `version` (a state the session was in)."""

    turn_id: UUID | None
    version: int


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
    idempotency_key: str | None
    graph: str
    form: list[dict[str, Any]]
    fields: dict[str, Any]
    stage: str
    # The session's head when claimed: the state this turn starts from.
    parent_id: UUID | None
    head_values: dict[str, Any]
    # For a resume: the pending interrupt it answers ({"turn_id", "thread_id", "interrupts"}).
    interrupt: dict[str, Any] | None = None

    @property
    def resume(self) -> bool:
        return "resume" in self.request

    @property
    def thread_id(self) -> str:
        """The checkpoint thread the run uses: its own, or for a resume the
        paused run's."""
        if self.resume and self.interrupt is not None:
            return self.interrupt["thread_id"]
        return checkpoint_thread_id(self.session_id, self.epoch, self.turn_id)


@dataclass(frozen=True)
class Outcome:
    """What a finished run proposes to commit."""

    reply: str
    new_messages: list[dict[str, Any]]  # message_to_dict of what the turn added
    replaces_history: bool  # new_messages is the whole, rewritten conversation
    message_count: int
    field_changes: dict[str, Any]
    fields: dict[str, Any]
    stage: str
    values: dict[str, Any]  # the graph's other channels, as JSON
    interrupts: list[dict[str, Any]]  # [{"id", "value"}] when the graph paused
    thread_id: str
    checkpoint_id: str | None = None  # of a paused run, persisted
    effects: list[dict[str, Any]] = field(default_factory=list)
    # The conversation's message objects after the turn, for this process's
    # cache once committed; not part of what is committed.
    conversation: list[Any] = field(default_factory=list, repr=False, compare=False)


@dataclass(frozen=True)
class TurnEvent:
    """One event of a turn's stream; `data` is JSON text."""

    id: int
    event: str
    data: str


TERMINAL_EVENTS = frozenset({"done", "error"})
