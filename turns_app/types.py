"""Plain data passed between the steps of a turn. No Django, no LangGraph:
the graph step, the execution layer and the SSE transport all import this
module and nothing above it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

# A turn request's options beside its text (ChatIn's), which the graph step
# passes to graphs that have such input channels.
REQUEST_OPTIONS = ("client_mode", "need_form_update")

# The Agent Protocol's stream modes the graph step can log for a run, and
# the events each is logged (and sent) as (docs/agent-protocol.md, "Streams and errors").
EVENTS_OF_MODE: dict[str, frozenset[str]] = {
    "values": frozenset({"values"}),
    "updates": frozenset({"updates"}),
    "messages-tuple": frozenset({"messages"}),
    # The token stream: each message's metadata once, then the message so far.
    "messages": frozenset({"messages/metadata", "messages/partial", "messages/complete"}),
    "custom": frozenset({"custom"}),
    "tasks": frozenset({"tasks"}),
    "checkpoints": frozenset({"checkpoints"}),
    "debug": frozenset({"debug"}),
    "events": frozenset({"events"}),
}
# A subgraph's part (`stream_subgraphs`) is logged as its event's name and
# this mark, its data `[namespace, data]`: sent as `<event>|<ns>|<ns>…`.
SUBGRAPH_MARK = "|"
_ROOT_EVENTS = frozenset().union(*EVENTS_OF_MODE.values())
NATIVE_EVENTS = _ROOT_EVENTS | {e + SUBGRAPH_MARK for e in _ROOT_EVENTS}
NO_STREAM_MODES: frozenset[str] = frozenset()


def stream_modes_of(request: dict[str, Any]) -> frozenset[str]:
    """The protocol stream modes a turn's request asks to be logged
    (`request["protocol"]["stream_mode"]`); /api/ requests name none."""
    protocol = request.get("protocol")
    if protocol is None:
        return NO_STREAM_MODES
    modes = protocol.get("stream_mode") if isinstance(protocol, dict) else None
    return frozenset(m for m in modes or () if m in EVENTS_OF_MODE)


def needs_pause(request: dict[str, Any]) -> bool:
    """A request that only means something to a paused graph: a resume
    (`resume`, or a command carrying one)."""
    command = request.get("command")
    return "resume" in request or (isinstance(command, dict) and "resume" in command)


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


# A turn request's key naming the checkpoint inside an earlier run the turn
# started from ({"turn_id", "step"}; step -1: that run's input): its
# history's first state has that checkpoint as its parent.
FROM_STEP = "from"


@dataclass(frozen=True)
class StartFrom:
    """A committed state a turn starts from instead of the session's
    current one: just after `turn_id` (None: the start) at session
    `version` (a state the session was in) — or, with `inside`, the state
    at LangGraph `step` of that finished turn, whose parent `turn_id` is
    (-1: its input checkpoint, where LangGraph drops the input still to
    run, so the state is the parent's)."""

    turn_id: UUID | None
    version: int
    inside: UUID | None = None
    step: int | None = None


@dataclass(frozen=True)
class StepStart:
    """The step inside an earlier run a turn starts from: that turn's id and
    its record of the step (turns_app.step_records: `next`, the messages
    and channels by reference to the turn's final state), and the node
    LangGraph would take a state update there to be written by (None: it
    cannot tell)."""

    turn_id: UUID
    record: dict[str, Any]
    as_node: str | None = None

    @property
    def pending(self) -> list[str | dict[str, Any]]:
        """The tasks the step had left to run: node names, and a sent
        task's Send as JSON (`{"node", "input"}`, as a command's goto)."""
        tasks = self.record.get("tasks") or ()
        if not any("send" in task for task in tasks):
            return list(self.record.get("next") or ())
        # LangGraph's `next` names the same tasks, in this order.
        return [task.get("send") or task["name"] for task in tasks]


@dataclass(frozen=True)
class Claim:
    """What a run needs, copied out of the locked rows."""

    first_event: TurnEvent  # `turn`, written with the claim
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
    # The committed turn whose state this turn starts from: the session's
    # head when claimed, or an earlier one (`rewinds`).
    parent_id: UUID | None
    head_values: dict[str, Any]
    # The pause the run starts from — the session's pending interrupt
    # ({"turn_id", "thread_id", "checkpoint_id", "interrupts", "next"}) — for
    # a resume, and for any protocol run on a paused session.
    interrupt: dict[str, Any] | None = None
    # The protocol stream modes the graph step logs as events (EVENTS_OF_MODE);
    # none for /api/ turns, whose steps then serialize no snapshots.
    stream_modes: frozenset[str] = NO_STREAM_MODES
    # The turn starts from an earlier committed state (`parent_id`, not the
    # session's head): its commit rewinds the session there first.
    rewinds: bool = False
    # The session's owner: a graph's store namespaces are the owner's.
    owner: str = ""
    # A turn started from a step inside an earlier run (`rewinds` too).
    step_start: StepStart | None = None

    @property
    def resume(self) -> bool:
        return needs_pause(self.request)

    @property
    def thread_id(self) -> str:
        """The checkpoint thread the run uses: its own, or, starting from a
        pause, the paused run's."""
        if self.interrupt is not None:
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
    # A paused run's next nodes: with no interrupts, a breakpoint
    # (interrupt_before/after) or a state update that left tasks to run.
    next_nodes: list[str] = field(default_factory=list)
    effects: list[dict[str, Any]] = field(default_factory=list)
    # The run's checkpoints, one record per LangGraph step (turns_app's
    # step_records), committed with the turn.
    steps: list[dict[str, Any]] = field(default_factory=list)
    # The conversation's message objects after the turn, for this process's
    # cache once committed; not part of what is committed.
    conversation: list[Any] = field(default_factory=list, repr=False, compare=False)

    @property
    def paused(self) -> bool:
        """The run stopped with work left: committed as `interrupted`, its
        checkpoint kept for what comes next."""
        return bool(self.interrupts or self.next_nodes)


@dataclass(frozen=True)
class TurnEvent:
    """One event of a turn's stream; `data` is JSON text."""

    id: int
    event: str
    data: str


TERMINAL_EVENTS = frozenset({"done", "error"})


# --- public checkpoint ids -------------------------------------------------------------

_EPOCH_HEX, _VERSION_HEX, _STEP_HEX = 8, 12, 12
# The step field holds the turn's number and LangGraph's step within it.
_TURN_STEP_BITS = 24
_TURN_STEP_MAX = 2**_TURN_STEP_BITS - 1


@dataclass(frozen=True, order=True)
class CheckpointRef:
    """A state of a session's history, by (epoch, version, step), written as
    a UUID of fixed-width hex fields so ids sort as text in the order the
    states were reached (useStream orders a thread's branches by comparing
    them as text). `step` 0 with version 0 is the start of the epoch; a
    turn's checkpoints are `step_ref`'s; a state the session reached without
    a turn (fields set, rewound) is its head's step at the session's version."""

    epoch: int
    version: int
    step: int

    @property
    def id(self) -> str:
        digits = f"{self.epoch:0{_EPOCH_HEX}x}{self.version:0{_VERSION_HEX}x}{self.step:0{_STEP_HEX}x}"
        return str(uuid.UUID(digits))


def step_ref(epoch: int, base_version: int, number: int, step: int) -> CheckpointRef:
    """The public id of the checkpoint at LangGraph `step` (-1: the input)
    of turn `number` of an epoch, which started at session `base_version`:
    known when the run streams it, before the commit gives the turn its
    version, so every checkpoint of a turn carries the version it started
    at."""
    return CheckpointRef(epoch, base_version, (number << _TURN_STEP_BITS) | max(0, min(step + 1, _TURN_STEP_MAX)))


def final_step(steps: list[dict[str, Any]] | None) -> int:
    """LangGraph's step of a turn's last checkpoint; 0 for a turn committed
    with no records of its steps (its history: the input, -1, and after it)."""
    return int(steps[-1]["step"]) if steps else 0


def final_ref(turn: Any) -> CheckpointRef:
    """The id of a finished turn's last checkpoint: the state after it."""
    return step_ref(turn.epoch, turn.base_version, turn.number, final_step(turn.steps))


def current_ref(epoch: int, version: int, head: Any | None) -> CheckpointRef:
    """The id of the state a session at `version` of `epoch` is in now: its
    head turn's last checkpoint, the epoch's start (no head), or, when the
    session moved on without a turn (fields set, rewound), the head's step
    at the session's version (docs/agent-protocol.md, "History")."""
    after = final_ref(head) if head is not None else CheckpointRef(epoch, 0, 0)
    if version != (head.version if head is not None else 0):
        return CheckpointRef(epoch, version, after.step)
    return after


def parse_checkpoint_id(raw: Any) -> CheckpointRef | None:
    """None for anything that is not one of our ids."""
    if not isinstance(raw, str) or len(raw) > 64:
        return None
    try:
        digits = uuid.UUID(raw).hex
    except ValueError:
        return None
    epoch = int(digits[:_EPOCH_HEX], 16)
    version = int(digits[_EPOCH_HEX : _EPOCH_HEX + _VERSION_HEX], 16)
    step = int(digits[_EPOCH_HEX + _VERSION_HEX :], 16)
    return CheckpointRef(epoch, version, step) if epoch > 0 else None
