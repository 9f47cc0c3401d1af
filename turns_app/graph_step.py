"""Step 2 of the protocol, the graph adapter: run the session's graph for a
claimed turn, turn what it streams into turn events, and propose an Outcome.

Any registered graph runs here unchanged (graphs.runtime.registry has the
contract): the turn starts from the session's committed state — the
conversation up to the head turn, the head turn's other channel values, and
the session row's form, fields and stage for the channels of those names —
on a checkpoint thread of its own, held in memory
(graphs.runtime.run_checkpoints). Nothing is written while the graph runs;
a run that pauses (`interrupt()`) has its checkpoint written before the turn
commits, so a resume finds it from any process, after any restart. The
runner knows no node names: `delta`s come from every node's AI message
chunks (LangGraph leaves out those tagged `nostream`), `tool_call` and
`tool_result` from the messages nodes add, `fields` from updates of the
`fields` channel, `interrupt` from the graph pausing.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, StreamMode
from pydantic import BaseModel

from core.errors import StateLost
from graphs.intake import form_spec
from graphs.runtime import effects
from graphs.runtime.registry import FIELDS, FORM, MESSAGES, REJECTED, STAGE, GraphShape, graph_for, shape_of
from graphs.runtime.run_checkpoints import RunCheckpoints
from graphs.runtime.savers import get_saver
from turns_app import faults, history
from turns_app.stream_parts import NativeParts
from turns_app.types import REQUEST_OPTIONS, Claim, Outcome

logger = logging.getLogger(__name__)

Emit = Callable[[str, dict[str, Any] | str], Awaitable[None]]  # data: a dict, or JSON text

STAGE_MAX_LENGTH = 64
# Channels the protocol itself fills or reads: not carried as "other values".
NOT_CARRIED = frozenset({MESSAGES, FIELDS, STAGE, FORM})

_run_checkpoints: weakref.WeakKeyDictionary[BaseCheckpointSaver, RunCheckpoints] = weakref.WeakKeyDictionary()


class GraphContractError(RuntimeError):
    """The graph did something the contract does not allow (a bug in it)."""


async def run_checkpoints(shard_key: str) -> RunCheckpoints:
    durable = await get_saver(shard_key)
    saver = _run_checkpoints.get(durable)
    if saver is None:
        saver = _run_checkpoints[durable] = RunCheckpoints(durable)
    return saver


def to_json(value: Any) -> Any:
    """A channel value as JSON (messages, pydantic models and dataclasses
    included); raises TypeError for what has no JSON form."""
    return json.loads(json.dumps(value, default=_json_default, ensure_ascii=False))


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return history.dump_messages([value])[0]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def _input_for(claim: Claim, shape: GraphShape, prior: list[BaseMessage]) -> Any:
    business = {FORM: claim.form, FIELDS: claim.fields, STAGE: claim.stage}
    # Fields, form and stage come from the session row, not the graph's last
    # state: set-fields changes the row between turns.
    from_row = {k: v for k, v in business.items() if k in shape.input_channels}
    if claim.resume:
        return Command(resume=claim.request["resume"], update=from_row or None)
    options = {k: claim.request[k] for k in REQUEST_OPTIONS if k in claim.request and k in shape.input_channels}
    carried = {k: v for k, v in claim.head_values.items() if k in shape.input_channels and k not in NOT_CARRIED}
    human = HumanMessage(content=claim.request["text"], id=f"{claim.turn_id}:user")
    return {**carried, **from_row, **options, MESSAGES: [*prior, human]}


class _Fields:
    """The fields the graph proposes, checked against the session's form: a
    value that does not validate is not committed, and is reported."""

    def __init__(self, claim: Claim) -> None:
        self.form = claim.form
        self.start = dict(claim.fields)
        self.current = dict(claim.fields)
        self.rejected: list[dict[str, Any]] = []

    @functools.cached_property
    def specs(self) -> dict[str, form_spec.FieldSpec]:
        # Parsed only for a graph with a `fields` channel: others never look.
        return {spec.name: spec for spec in form_spec.parse_form(self.form)} if self.form else {}

    def propose(self, proposed: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Apply a `fields` update; returns (changes it made, values refused)."""
        changes: dict[str, Any] = {}
        refused: list[dict[str, Any]] = []
        if not isinstance(proposed, dict):
            refused.append({"field": None, "value": None, "message": "fields must be an object"})
            proposed = {}
        for name, raw in proposed.items():
            if raw == self.current.get(name):
                continue
            spec = self.specs.get(name)
            if spec is None:
                refused.append({"field": name, "value": _shown(raw), "message": "unknown field"})
                continue
            try:
                value = form_spec.coerce_value(spec, raw)
            except form_spec.FieldValueError as exc:
                refused.append({"field": name, "value": _shown(raw), "message": exc.message})
                continue
            if value != self.current.get(name):
                changes[name] = value
                self.current[name] = value
        self.current = {k: v for k, v in self.current.items() if v is not None}
        self.rejected += refused
        return changes, refused

    @property
    def changes(self) -> dict[str, Any]:
        return {k: v for k, v in self.current.items() if self.start.get(k) != v} | {
            k: None for k in self.start if k not in self.current
        }


def _shown(value: Any) -> Any:
    try:
        return to_json(value)
    except TypeError:
        return repr(value)[:200]


async def run_graph(claim: Claim, emit: Emit, *, deltas: bool = True) -> Outcome:
    """`deltas` off: no `delta` events. LangGraph's `messages` stream mode
    is then left off (unless a protocol run asked for its message chunks),
    so the model answers in one piece, as `ainvoke` would have it: token
    streaming cost a JSON turn a sixth of its CPU (docs/scale.md, "CPU")."""
    saver = await run_checkpoints(str(claim.session_id))
    graph = graph_for(claim.graph, saver)
    shape = shape_of(graph)
    prior = await history.conversation(claim.session_id, claim.parent_id)
    fields = _Fields(claim)
    context = effects.TurnContext(
        session_id=claim.session_id,
        epoch=claim.epoch,
        turn_id=claim.turn_id,
        idempotency_key=claim.idempotency_key,
    )
    thread_id = claim.thread_id
    configurable: dict[str, Any] = {"thread_id": thread_id}
    config: RunnableConfig = {"configurable": configurable}
    if claim.resume:
        # From the checkpoint the pause committed: a later run on the thread
        # that failed to commit may have left newer ones. (A resume's claim
        # carries the interrupt it answers: the claim refuses one without.)
        configurable["checkpoint_id"] = cast(dict[str, Any], claim.interrupt)["checkpoint_id"]
        paused = await saver.durable.aget_tuple({"configurable": {**configurable, "checkpoint_ns": ""}})
        if paused is None:
            raise StateLost()
    final: dict[str, Any] = {}
    interrupts: list[dict[str, Any]] = []
    streamed_any = False
    native = NativeParts(claim.stream_modes, emit)  # a protocol run's own stream modes
    modes: list[StreamMode] = ["messages"] if deltas or native.wants_messages else []
    modes += ["updates", "values", *native.extra_stream_modes]
    saver.begin(thread_id, fresh=not claim.resume)
    try:
        with effects.running(context):
            # durability="exit": checkpoints are written (to memory) once, when the run ends.
            async for part in graph.astream(
                _input_for(claim, shape, prior),
                config,
                stream_mode=modes,
                version="v2",
                durability="exit",
            ):
                if native.wanted:
                    await native.log(part)
                if part["type"] == "messages" and deltas:
                    chunk, _meta = part["data"]
                    text = chunk.text if isinstance(chunk, (AIMessageChunk, AIMessage)) else ""
                    if text:
                        await emit("delta", {"text": text})
                        if not streamed_any:
                            streamed_any = True
                            faults.hit("mid_stream")
                elif part["type"] == "updates":
                    for node, update in (part["data"] or {}).items():
                        if node == "__interrupt__":
                            interrupts += [{"id": i.id, "value": _shown(i.value)} for i in update]
                        elif isinstance(update, dict):
                            await _emit_update(update, shape, fields, emit)
                elif part["type"] == "values" and isinstance(part["data"], dict):
                    final = part["data"]
        checkpoint_id = await saver.persist(thread_id) if interrupts else None
    finally:
        saver.discard(thread_id)
    return _outcome(claim, shape, prior, final, fields, interrupts, checkpoint_id, context)


async def _emit_update(update: dict[str, Any], shape: GraphShape, fields: _Fields, emit: Emit) -> None:
    for message in update.get(MESSAGES) or ():
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                await emit(
                    "tool_call", {"id": call.get("id"), "name": call.get("name"), "args": _shown(call.get("args"))}
                )
        elif isinstance(message, ToolMessage):
            await emit(
                "tool_result",
                {
                    "tool_call_id": message.tool_call_id,
                    "name": message.name,
                    "status": message.status,
                    "content": message.text,
                },
            )
    if FIELDS in update and shape.has_fields:
        changes, refused = fields.propose(update[FIELDS])
        reported = update.get(REJECTED) if isinstance(update.get(REJECTED), list) else []
        await emit("fields", {"field_changes": changes, "rejected": [*_shown(reported), *refused]})


def _outcome(
    claim: Claim,
    shape: GraphShape,
    prior: list[BaseMessage],
    final: dict[str, Any],
    fields: _Fields,
    interrupts: list[dict[str, Any]],
    checkpoint_id: str | None,
    context: effects.TurnContext,
) -> Outcome:
    messages = list(final.get(MESSAGES) or [])
    kept = [m.id for m in messages[: len(prior)]] == [m.id for m in prior]
    added = messages[len(prior) :] if kept else messages
    replies = [m for m in added if isinstance(m, AIMessage)]
    reply = replies[-1].text if replies else ""
    if not interrupts and not replies:
        raise GraphContractError("the graph finished without a reply")
    if shape.has_fields and FIELDS in final:
        fields.propose(final[FIELDS])
    if STAGE in shape.channels and isinstance(final.get(STAGE), str):
        stage = final[STAGE][:STAGE_MAX_LENGTH]
    elif shape.has_fields:
        missing = form_spec.missing_required(list(fields.specs.values()), fields.current)
        stage = "collecting" if missing else "complete"
    else:
        stage = claim.stage
    values = {}
    for name, value in final.items():
        if name in NOT_CARRIED:
            continue
        try:
            values[name] = to_json(value)
        except TypeError as exc:
            logger.warning("graph %s: channel %s is not carried to the next turn: %s", claim.graph, name, exc)
    return Outcome(
        # A model may emit U+0000, which PostgreSQL's jsonb cannot hold.
        reply=reply.replace("\x00", ""),
        new_messages=_storable(history.dump_messages(added)),
        replaces_history=not kept,
        message_count=len(messages),
        field_changes=fields.changes,
        fields=fields.current,
        stage=stage,
        values=_storable(values),
        interrupts=interrupts,
        thread_id=claim.thread_id,
        checkpoint_id=checkpoint_id,
        effects=list(context.recorded),
        conversation=messages,
    )


def _storable(value: Any) -> Any:
    """PostgreSQL's jsonb refuses U+0000 in strings; a model may produce it."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_storable(v) for v in value]
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    return value
