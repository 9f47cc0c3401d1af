"""Threads are sessions, checkpoints are committed states: the protocol's
Thread, ThreadState and history, read from a session and its turns. Sync (they
read through turns_app's and sessions_app's selectors); async callers go
through `core.asyncdb.db`.

A session's history in the protocol's terms, per epoch: the start; for each
finished turn, its checkpoints as LangGraph made them, one per step (the
input at step -1 — what a regenerate starts from; a turn given no input, a
resume, a command, `input: null`, has none — then each superstep; a state
update's one), from the records its commit stored (langgraph_app.steps),
the last one the state after the turn; and, when the session moved on
without a turn (fields set, rewound), its current state on top of its head
turn. A turn committed before steps were recorded shows the state before
its reply and the state after it. Values are the graph's state: the
conversation up to that turn, its other channels, and the business
channels (`fields`, `stage`, `form`) the graph has.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from langchain_core.messages import HumanMessage
from langgraph.pregel import Pregel

from core.errors import SessionNotFound
from graphs.runtime.registry import FIELDS, FORM, MESSAGES, STAGE, GraphShape, build_graph, shape_of
from langgraph_app import steps as step_json
from langgraph_app.errors import run_not_found, thread_not_found
from langgraph_app.ids import CheckpointRef, assistant_id, parse_checkpoint_id
from sessions_app import selectors as sessions
from sessions_app.selectors import AgentSession
from turns_app import graph_input
from turns_app import selectors as turn_selectors
from turns_app.native_json import message_json
from turns_app.selectors import AgentTurn
from turns_app.types import FROM_STEP, current_ref, final_ref, step_ref

SOURCE = {"start": "input", "input": "input", "after": "loop", "step": "loop", "now": "update"}


def thread_of(*, owner: str, key: str, where: dict[str, Any] | None = None) -> AgentSession:
    try:
        return sessions.session_get(owner=owner, key=key, where=where)
    except SessionNotFound:
        raise thread_not_found(key) from None


@functools.lru_cache(maxsize=64)
def _built(graph: str, path: str) -> tuple[Pregel, GraphShape] | None:
    try:
        built = build_graph(graph, checkpointer=None)
    except (ImproperlyConfigured, KeyError, LookupError):
        return None
    return built, shape_of(built)


def built_graph(graph: str) -> tuple[Pregel, GraphShape] | None:
    """The session's graph and its shape, built once; None for a graph no
    longer registered (its history is then shown as it was stored)."""
    return _built(graph, settings.AGENT_GRAPHS.get(graph, ""))


def channels_of(graph: str) -> frozenset[str]:
    built = built_graph(graph)
    return built[1].channels if built is not None else frozenset({MESSAGES})


def status_of(session: AgentSession) -> str:
    """LangGraph's thread status. A failed run commits nothing, so the
    thread stays where it was (`idle`, or `interrupted`); `error` never."""
    if session.active_turn_id and session.lease_expires_at and session.lease_expires_at > timezone.now():
        return "busy"
    return "interrupted" if session.interrupt else "idle"


def iso(moment: datetime | str | None) -> str | None:
    return moment.isoformat() if isinstance(moment, datetime) else moment


# --- states ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    ref: CheckpointRef
    kind: str  # start | input | step | after | now
    turn: AgentTurn | None  # input/step/after: the turn; now: the head turn
    parent: CheckpointRef | None
    created_at: datetime | str | None
    # The commit's record of this LangGraph step (None: the start, the
    # current state, and the states of a turn committed without records),
    # and of the step before it in the same turn.
    record: dict[str, Any] | None = None
    previous: dict[str, Any] | None = None


def finished_turns(session: AgentSession) -> list[AgentTurn]:
    return turn_selectors.turn_list_finished(session=session)


def version_after(turn: AgentTurn) -> int:
    """The session version a finished turn's commit left (every commit sets it)."""
    assert turn.version is not None, f"turn {turn.id} is not finished"
    return turn.version


def states_of(session: AgentSession, turns: list[AgentTurn]) -> list[State]:
    """Every state of the session's epoch, newest first (by checkpoint id)."""
    epoch = session.epoch
    by_id = {t.id: t for t in turns}
    start = State(CheckpointRef(epoch, 0, 0), "start", None, None, session.created_at)

    def after(turn_id: UUID | None) -> CheckpointRef:
        turn = by_id.get(turn_id) if turn_id is not None else None
        return final_ref(turn) if turn is not None else start.ref

    found = [start]
    for turn in turns:
        origin = _origin(turn, by_id)
        found += _turn_states(turn, origin.ref if origin is not None else after(turn.parent_id))
    head_turn = by_id.get(session.head_turn_id) if session.head_turn_id is not None else None
    head = after(session.head_turn_id)
    now = current_ref(epoch, session.version, head_turn)
    if now != head:  # moved on without a turn
        found.append(State(now, "now", head_turn, head, session.updated_at))
    floor = parse_checkpoint_id(session.pruned_before)
    if floor is not None:
        # A prune kept the latest state only: what came before is gone, the
        # kept state's parent with it (docs/agent-protocol.md, "Thread lifecycle").
        kept = [s for s in found if s.ref >= floor]
        found = [s if s.parent is None or s.parent >= floor else replace(s, parent=None) for s in kept]
    return sorted(found, key=lambda s: s.ref, reverse=True)


def _origin(turn: AgentTurn, by_id: dict[UUID, AgentTurn]) -> State | None:
    """The checkpoint inside an earlier run a turn started from (the
    request's FROM_STEP): its first state's parent (None: the state after
    its parent turn)."""
    origin = turn.request.get(FROM_STEP)
    within = by_id.get(UUID(origin["turn_id"])) if isinstance(origin, dict) else None
    if within is None:
        return None
    assert origin is not None
    step = int(origin["step"])
    ref = step_ref(within.epoch, within.base_version, within.number, step)
    record = next((r for r in within.steps or () if int(r["step"]) == step), None)
    return State(ref, "step" if record is not None else "input", within, None, None, record)


def _turn_states(turn: AgentTurn, parent: CheckpointRef) -> list[State]:
    """A turn's checkpoints, oldest first, from its records (the last one is
    the state after it), or for a turn committed without them, the state
    before its reply (if it was given input) and after it."""
    out = []
    records = turn.steps or []
    if not records:
        if has_input(turn):
            before_reply = step_ref(turn.epoch, turn.base_version, turn.number, -1)
            out.append(State(before_reply, "input", turn, parent, turn.created_at))
            parent = before_reply
        out.append(State(final_ref(turn), "after", turn, parent, turn.finished_at))
        return out
    previous = None
    for index, record in enumerate(records):
        ref = step_ref(turn.epoch, turn.base_version, turn.number, int(record["step"]))
        last = index == len(records) - 1
        kind = "after" if last else ("input" if record.get("source") == "input" else "step")
        out.append(State(ref, kind, turn, parent, record.get("created_at"), record, previous))
        parent, previous = ref, record
    return out


def has_input(turn: AgentTurn) -> bool:
    """Whether the turn's run was given input (text, or a protocol input
    other than null): only then is there a state with it applied before the
    run's reply. A resume, a command or a state update has none, as a
    LangGraph run given no input writes no input checkpoint."""
    kind = graph_input.request_kind(turn.request)
    return kind == "text" or (kind == "input" and turn.request.get("input") is not None)


def current_state(session: AgentSession, states: list[State]) -> State:
    """The state the session is in now: the newest on its head."""
    head = session.head_turn_id
    for state in states:
        if (
            state.kind == "now"
            or (state.kind == "after" and state.turn is not None and state.turn.id == head)
            or (state.kind == "start" and head is None)
        ):
            return state
    raise AssertionError("a session always has a current state")


def find_state(states: list[State], ref: CheckpointRef) -> State | None:
    return next((s for s in states if s.ref == ref), None)


# The stored conversation up to a turn (None: the start), as message dicts:
# a fresh list each call (values_of appends to it).
Messages = Callable[[UUID | None], list[dict[str, Any]]]


def values_of(
    session: AgentSession, state: State, by_id: dict[UUID, AgentTurn], messages_of: Messages | None = None
) -> dict[str, Any]:
    """The graph's state at `state`, as the protocol's `values`."""
    read = messages_of or messages_up_to
    turn = state.turn
    if state.kind == "step":
        assert turn is not None and state.record is not None  # a step is its turn's record
        final = values_of(session, State(state.ref, "after", turn, None, None), by_id, messages_of)
        conversation = step_json.Conversation(lambda: final[MESSAGES])
        return step_json.step_values(state.record, final, conversation)
    if state.kind == "input":
        assert turn is not None  # an input state is its turn's
        origin = _origin(turn, by_id)
        if origin is not None and origin.kind == "step":  # the input applied to a step inside an earlier run
            values = values_of(session, origin, by_id, messages_of)
            return step_json.given_to(built_graph(session.graph), values, turn)
        base = by_id.get(turn.parent_id) if turn.parent_id is not None else None
        messages = read(base.id if base else None)
        if "text" in turn.request:
            human = HumanMessage(content=turn.request["text"], id=f"{turn.id}:user")
            messages.append(message_json(human))
        fields, stage, other = _business(session, base)
    elif state.kind == "now":
        messages = read(turn.id if turn else None)
        fields, stage, other = session.fields, session.stage, (turn.values if turn else {})
    else:  # start, after
        messages = read(turn.id if turn else None)
        fields, stage, other = _business(session, turn)
    channels = channels_of(session.graph)
    values = {**(other or {}), MESSAGES: messages}
    if FIELDS in channels:
        values[FIELDS] = fields or {}
    if STAGE in channels:
        values[STAGE] = stage
    if FORM in channels:
        values[FORM] = session.form
    if state.kind == "input" and turn is not None and turn.request.get("input") is not None:
        values = step_json.with_input(built_graph(session.graph), values, turn)
    return values


def _business(session: AgentSession, turn: AgentTurn | None) -> tuple[dict[str, Any], str, dict[str, Any]]:
    if turn is None:
        return {}, session.DEFAULT_STAGE, {}
    return turn.fields or {}, turn.stage or session.DEFAULT_STAGE, turn.values or {}


def messages_up_to(turn_id: UUID | None) -> list[dict[str, Any]]:
    return turn_selectors.message_data(turn_selectors.message_list(head_turn_id=turn_id))


def _checkpoint(key: str, ref: CheckpointRef | None) -> dict[str, Any] | None:
    if ref is None:
        return None
    return {"thread_id": key, "checkpoint_ns": "", "checkpoint_id": ref.id, "checkpoint_map": None}


def _pending(session: AgentSession, state: State) -> list[dict[str, Any]]:
    """The interrupts a state waits on: an interrupted turn's, or the
    session's pending one for its current state."""
    if state.kind == "after" and state.turn is not None and state.turn.status == AgentTurn.Status.INTERRUPTED:
        return list(state.turn.interrupts or [])
    if state.kind == "now" and session.interrupt:
        return list(session.interrupt["interrupts"])
    return []


def state_metadata(session: AgentSession, state: State) -> dict[str, Any]:
    """A state's `metadata`: known without reading its conversation, so a
    history filter runs before any values are built."""
    source = state.record.get("source", "loop") if state.record is not None else SOURCE[state.kind]
    metadata: dict[str, Any] = {
        "source": source,
        "step": step_json.step_of(state.kind, state.record, state.turn),
        "graph_id": session.graph,
        "assistant_id": assistant_id(session.graph),
        "thread_id": session.key,
        "parents": {},
    }
    if state.turn is not None:
        metadata["run_id"] = str(state.turn.id)
    return metadata


def state_json(
    session: AgentSession, state: State, by_id: dict[UUID, AgentTurn], messages_of: Messages | None = None
) -> dict[str, Any]:
    values = values_of(session, state, by_id, messages_of)
    metadata = state_metadata(session, state)
    record = state.record
    if record is not None and state.turn is not None:
        turn_id, read = state.turn.id, messages_of or messages_up_to
        conversation = step_json.Conversation(
            (lambda: values[MESSAGES]) if state.kind == "after" else (lambda: read(turn_id))
        )
        next_nodes = list(record.get("next") or [])
        tasks = step_json.tasks_json(record, state.turn.request, state.turn.id, conversation)
        interrupts = step_json.interrupts_of(record)
        metadata["writes"] = step_json.writes(record, state.previous, state.turn.request, state.turn.id, conversation)
    else:
        interrupts = _pending(session, state)
        waiting = str(state.turn.id if state.turn is not None else state.ref.id)
        next_nodes, tasks = step_json.unrecorded_tasks(state.kind, waiting, interrupts)
        metadata["writes"] = None
    return {
        "values": values,
        "next": next_nodes,
        "tasks": tasks,
        "checkpoint": _checkpoint(session.key, state.ref),
        "parent_checkpoint": _checkpoint(session.key, state.parent),
        "metadata": metadata,
        "created_at": iso(state.created_at),
        "interrupts": interrupts,
    }


# --- what the endpoints read ----------------------------------------------------------------------


def thread_json(session: AgentSession, *, with_values: bool = True) -> dict[str, Any]:
    values = None
    if with_values:
        turns = finished_turns(session)
        state = current_state(session, states_of(session, turns))
        values = values_of(session, state, {t.id: t for t in turns})
    interrupts = {str(session.head_turn_id): session.interrupt["interrupts"]} if session.interrupt else {}
    return {
        "thread_id": session.key,
        "created_at": iso(session.created_at),
        "updated_at": iso(session.updated_at),
        "state_updated_at": iso(session.updated_at),
        "metadata": session.metadata,
        "status": status_of(session),
        "config": {},
        "values": values,
        "interrupts": interrupts,
    }


def thread_state(*, owner: str, key: str, ref: CheckpointRef | None = None) -> dict[str, Any]:
    """The current state, or the one `ref` names (404 if the thread has no such state)."""
    session = thread_of(owner=owner, key=key)
    turns = finished_turns(session)
    states = states_of(session, turns)
    if ref is None:
        state = current_state(session, states)
    else:
        found = find_state(states, ref)
        if found is None:
            raise SessionNotFound(f"Thread {key} has no checkpoint {ref.id}")
        state = found
    return state_json(session, state, {t.id: t for t in turns})


def turn_values(*, owner: str, key: str, turn_id: UUID) -> dict[str, Any]:
    """The state values just after a finished turn (a wait/join answer): read from that turn
    and the cache's conversation, so no dearer on a long thread (docs/scale.md, "CPU")."""
    sessions.check_session_key(key)
    turn = turn_selectors.thread_turn_finished(owner=owner, key=key, turn_id=turn_id)
    if turn is None:
        thread_of(owner=owner, key=key)  # the thread's 404, if it is the thread that is missing
        raise run_not_found(turn_id)
    session = turn.session
    state = State(CheckpointRef(turn.epoch, turn.version or 0, 2 * turn.number), "after", turn, None, turn.finished_at)

    def messages_of(head: UUID | None) -> list[dict[str, Any]]:
        return turn_selectors.message_data(turn_selectors.stored_messages(session_id=session.id, head_turn_id=head))

    return values_of(session, state, {turn.id: turn}, messages_of)  # an "after" state reads no other turn


def state_after_turn(*, owner: str, key: str, turn_id: UUID) -> dict[str, Any] | None:
    """The ThreadState a finished turn of the epoch left (None: it left none)."""
    session = thread_of(owner=owner, key=key)
    turns = finished_turns(session)
    for state in states_of(session, turns):
        if state.kind == "after" and state.turn is not None and state.turn.id == turn_id:
            return state_json(session, state, {t.id: t for t in turns})
    return None
