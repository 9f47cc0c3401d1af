"""`POST /threads/{id}/state`: a state update is a turn like any other — claimed,
run, committed, version-moving, `Idempotency-Key` honoured — whose run is
LangGraph's own `aupdate_state` on the thread's committed state
(turns_app.graph_input): any channels of the graph, written as `as_node`
(or the node LangGraph infers), through each channel's reducer. An update
that leaves tasks to run (`as_node` with nodes after it) pauses the thread
there; a run with no input goes on from it. At the current checkpoint it
is conditional on the thread still being there; at an earlier one it forks
from it: the update is applied to that state and its commit makes the
result the thread's head (docs/agent-protocol.md, "State updates")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.asyncdb import db
from core.errors import InvalidFields, ValidationFailed, VersionConflict
from graphs.intake import form_spec
from graphs.runtime.registry import FIELDS, MESSAGES, GraphShape, shape_for
from langgraph_app import threads
from langgraph_app.errors import not_supported
from langgraph_app.ids import CheckpointRef, checkpoint_ref
from langgraph_app.run_input import check_messages
from langgraph_app.runs import StartPoint, start_note, start_point
from langgraph_app.schemas import ThreadStateUpdate
from sessions_app import selectors as sessions
from turns_app.execution import TurnRun, await_turn, start_turn
from turns_app.services import check_idempotency_key

END = "__end__"


@dataclass(frozen=True)
class _At:
    """Where the update applies: at the thread's current state (the
    version it must still be at), or, forking, at an earlier checkpoint."""

    graph: str
    form: list[dict[str, Any]]
    expected_version: int | None = None
    point: StartPoint | None = None


def _where(owner: str, key: str, ref: CheckpointRef | None) -> _At:
    session = threads.thread_of(owner=owner, key=key)
    if ref is None:
        return _At(session.graph, session.form, session.version)
    current = threads.current_state(session, threads.states_of(session, threads.finished_turns(session)))
    if current.ref == ref:
        return _At(session.graph, session.form, session.version)
    # An earlier checkpoint (404 if the thread has none): LangGraph forks
    # from it, and so does this update's commit.
    return _At(session.graph, session.form, point=start_point(owner=owner, key=key, ref=ref))


def _checked(payload: ThreadStateUpdate, shape: GraphShape, form: list[dict[str, Any]]) -> dict[str, Any]:
    values, as_node = payload.values, payload.as_node
    if as_node is not None and as_node not in shape.nodes and as_node != END:
        raise ValidationFailed(f"as_node: the graph has no node {as_node[:80]!r}")
    if as_node == END and values is not None:
        raise ValidationFailed("as_node __end__ takes no values (it clears the tasks left to run)")
    if values is None:
        if as_node is None:
            raise ValidationFailed("values is required (or as_node __end__)")
        return {"values": None, "as_node": as_node}
    if not isinstance(values, dict):
        raise ValidationFailed("values must be an object of the graph's channels")
    unknown = sorted(set(values) - shape.channels)
    if unknown:
        raise ValidationFailed(f"values.{unknown[0][:40]} is not a channel of the graph")
    if MESSAGES in values:
        check_messages(values[MESSAGES], "values.messages")
    if FIELDS in values and shape.has_fields:
        # Business fields are checked against the thread's form up front, as
        # set-fields checks them: a value that does not validate is refused.
        if not isinstance(values[FIELDS], dict):
            raise ValidationFailed("values.fields must be an object")
        try:
            form_spec.validate_fields(form_spec.stored_form(form), values[FIELDS])
        except form_spec.FieldsInvalid as exc:
            raise InvalidFields(details=exc.errors) from None
    return {"values": values, "as_node": as_node}


async def update_state(
    *, owner: str, key: str, payload: ThreadStateUpdate, idempotency_key: str | None
) -> dict[str, Any]:
    """Apply the update as a turn; answers the new state's checkpoint."""
    sessions.check_session_key(key)
    idempotency_key = check_idempotency_key(idempotency_key)
    checkpoint = payload.checkpoint
    if checkpoint is not None and checkpoint.checkpoint_ns:
        raise not_supported("a subgraph checkpoint (checkpoint_ns)")
    raw = checkpoint.checkpoint_id if checkpoint is not None else payload.checkpoint_id
    ref = checkpoint_ref(raw) if raw else None
    at = await db(_where, owner=owner, key=key, ref=ref)
    shape = await db(shape_for, name=at.graph)
    request: dict[str, Any] = {"state": _checked(payload, shape, at.form), "protocol": {"stream_mode": []}}
    request.update(start_note(ref, at.point.origin if at.point is not None else None))
    try:
        started = await start_turn(
            owner=owner,
            key=key,
            request=request,
            idempotency_key=idempotency_key,
            expected_version=at.expected_version,
            start_from=at.point.start_from if at.point is not None else None,
            deltas=False,
        )
    except VersionConflict as conflict:
        raise VersionConflict("the thread is no longer at that checkpoint", details=conflict.details) from None
    if isinstance(started, TurnRun):
        await await_turn(started)
    # The update's own state (a replay answers the same), else the thread's.
    state = await db(threads.state_after_turn, owner=owner, key=key, turn_id=started.turn_id)
    if state is None:
        state = await db(threads.thread_state, owner=owner, key=key)
    return {"checkpoint": state["checkpoint"]}
