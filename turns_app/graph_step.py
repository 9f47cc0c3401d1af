"""Step 2 of the protocol, the graph adapter: run the session's graph for a
claimed turn, turn what it streams into turn events, and propose an Outcome.

Any registered graph runs here unchanged (graphs.runtime.registry has the
contract): the turn starts from the session's committed state — the
conversation up to its parent turn, that turn's other channel values, and
the session row's form, fields and stage for the channels of those names —
on a checkpoint thread of its own, held in memory
(graphs.runtime.run_checkpoints), or from the pause it answers, on the
paused run's checkpoint. What the graph is handed (input, Command, state
update) is graph_input's; the Outcome, graph_outcome's. Nothing is written
while the graph runs; a run that pauses (`interrupt()`, a breakpoint, a
state update with tasks left) has its checkpoint written before the turn
commits, so what comes next finds it from any process, after any restart. The
runner knows no node names: `delta`s come from every node's AI message
chunks (LangGraph leaves out those tagged `nostream`), `tool_call` and
`tool_result` from the messages nodes add, `fields` from updates of the
`fields` channel, `interrupt` from the graph pausing.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StreamMode

from core.errors import StateLost
from graphs.runtime import effects
from graphs.runtime.registry import FIELDS, MESSAGES, REJECTED, GraphShape, graph_for_run, shape_of
from graphs.runtime.run_checkpoints import RunCheckpoints
from graphs.runtime.savers import get_saver
from turns_app import faults, graph_input, history, step_records, thread_stream_parts
from turns_app.graph_outcome import Fields, Pause, outcome, shown
from turns_app.stream_parts import NativeParts
from turns_app.types import Claim, Outcome

logger = logging.getLogger(__name__)

Emit = Callable[[str, dict[str, Any] | str], Awaitable[None]]  # data: a dict, or JSON text

_run_checkpoints: weakref.WeakKeyDictionary[BaseCheckpointSaver, RunCheckpoints] = weakref.WeakKeyDictionary()


async def run_checkpoints(shard_key: str) -> RunCheckpoints:
    durable = await get_saver(shard_key)
    saver = _run_checkpoints.get(durable)
    if saver is None:
        saver = _run_checkpoints[durable] = RunCheckpoints(durable)
    return saver


async def run_graph(claim: Claim, emit: Emit, *, deltas: bool = True) -> Outcome:
    """`deltas` off: no `delta` events. LangGraph's `messages` stream mode
    is then left off (unless a protocol run asked for its message chunks),
    so the model answers in one piece, as `ainvoke` would have it: token
    streaming cost a JSON turn a sixth of its CPU (docs/scale.md, "CPU")."""
    saver = await run_checkpoints(str(claim.session_id))
    fields = Fields(claim)
    context = effects.TurnContext(
        session_id=claim.session_id,
        epoch=claim.epoch,
        turn_id=claim.turn_id,
        idempotency_key=claim.idempotency_key,
        owner=claim.owner,
    )
    thread_id = claim.thread_id
    protocol = claim.request.get("protocol") or {}
    # A protocol run's config (its assistant's, merged with its own): the
    # graph reads it as LangGraph's server hands it over.
    asked = protocol.get("config") or {}
    configurable: dict[str, Any] = {**(asked.get("configurable") or {}), "thread_id": thread_id}
    config: RunnableConfig = {"configurable": configurable}
    for name in ("tags", "recursion_limit", "metadata"):
        if name in asked:
            config[name] = asked[name]
    run_context = {"context": protocol["context"]} if protocol.get("context") else {}
    graph = await graph_for_run(claim.graph, saver, config, protocol.get("context"))
    shape = shape_of(graph)
    prior = await history.conversation(claim.session_id, claim.parent_id)
    start = None
    if claim.step_start is not None:
        # A step inside an earlier run: its messages, from that run's conversation.
        ran = await history.conversation(claim.session_id, claim.step_start.turn_id)
        start = step_records.step_messages(claim.step_start.record, ran)
    if claim.interrupt is not None:
        # From the checkpoint the pause committed: a later run on the thread
        # that failed to commit may have left newer ones.
        configurable["checkpoint_id"] = claim.interrupt["checkpoint_id"]
        paused = await saver.durable.aget_tuple({"configurable": {**configurable, "checkpoint_ns": ""}})
        if paused is None:
            raise StateLost()
    final: dict[str, Any] = {}
    interrupts: list[dict[str, Any]] = []
    stopped = False  # LangGraph said `__interrupt__`: an interrupt() or a breakpoint
    seen_values = False
    streamed_any = False
    native = NativeParts(claim.stream_modes, emit, protocol.get("thread_id"))  # a protocol run's own stream modes
    modes: list[StreamMode] = ["messages"] if deltas or native.wants_messages else []
    modes += ["updates", "values", *native.extra_stream_modes]
    saver.begin(thread_id, fresh=claim.interrupt is None)
    try:
        with effects.running(context):
            run_input, write = await graph_input.prepare(claim, graph, shape, prior if start is None else start, config)
            # What was there before the run (a seed, the pause it resumes) is
            # not one of its checkpoints.
            known = saver.checkpoint_ids(thread_id)
            if claim.interrupt is not None:
                known.add(claim.interrupt["checkpoint_id"])
            native.ids = step_records.StreamIds(claim, known)
            if write is not None:
                if write.values is not None or write.as_node is not None:
                    config = await graph.aupdate_state(config, write.values, as_node=write.as_node)
                final = (await graph.aget_state(config)).values
            else:
                # durability="sync": every step's checkpoint is kept (in memory, as
                # LangGraph's objects), for the records the turn commits of them.
                async for part in thread_stream_parts.astream(
                    claim,
                    emit,
                    graph,
                    run_input,
                    config,
                    stream_mode=modes,
                    version="v2",
                    durability="sync",
                    interrupt_before=protocol.get("interrupt_before"),
                    interrupt_after=protocol.get("interrupt_after"),
                    **run_context,
                    # A protocol run's stream_subgraphs: their parts too, namespaced.
                    subgraphs=bool(protocol.get("stream_subgraphs")),
                ):
                    if native.wanted:
                        await native.log(part)
                    if part.get("ns"):
                        continue  # a subgraph's: the turn is the root graph's
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
                                stopped = True
                                _add_interrupts(interrupts, update)
                            elif isinstance(update, dict):
                                await _emit_update(update, shape, fields, emit)
                    elif part["type"] == "values" and isinstance(part["data"], dict):
                        final = part["data"]
                        seen_values = True
                        if part.get("interrupts"):
                            # Also where no `updates` come: a thread-stream
                            # run of a graph compiled without LangGraph's
                            # UpdatesTransformer (its v3 stream has no updates).
                            stopped = True
                            _add_interrupts(interrupts, part["interrupts"])
                if not seen_values:
                    # Nothing ran (a command that only updates): the state is the thread's.
                    final = (await graph.aget_state(config)).values
        # A thread-stream run's v3 stream tells a breakpoint on `updates`
        # only, which a graph without the UpdatesTransformer does not send:
        # its state says whether work is left.
        looked = stopped or write or thread_stream_parts.wants_protocol_events(claim)
        pause = await _pause_of(graph, saver, config, thread_id, interrupts) if looked else None
        snapshots = await step_records.run_steps(graph, thread_id, known)
        sends = await step_records.sent_tasks(graph, snapshots)
        steps = step_records.records(snapshots, list(final.get(MESSAGES) or []), sends)
    finally:
        saver.discard(thread_id)
    return outcome(claim, shape, prior, final, fields, pause, context, steps)


async def _pause_of(
    graph: Any, saver: RunCheckpoints, config: RunnableConfig, thread_id: str, interrupts: list[dict[str, Any]]
) -> Pause | None:
    """A run that stopped with work left (an interrupt, a breakpoint, a
    state update with tasks to run) has its checkpoints persisted; None if
    nothing is left to run."""
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    if not interrupts:
        interrupts = [{"id": i.id, "value": shown(i.value)} for i in snapshot.interrupts]
    if not snapshot.next and not interrupts:
        return None
    return Pause(interrupts, list(snapshot.next), await saver.persist(thread_id))


def _add_interrupts(interrupts: list[dict[str, Any]], raised: Any) -> None:
    """LangGraph tells an interrupt on `updates` and on `values` (v2 both):
    each counts once."""
    known = {i["id"] for i in interrupts}
    interrupts += [{"id": i.id, "value": shown(i.value)} for i in raised if i.id not in known]


async def _emit_update(update: dict[str, Any], shape: GraphShape, fields: Fields, emit: Emit) -> None:
    for message in update.get(MESSAGES) or ():
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                await emit(
                    "tool_call", {"id": call.get("id"), "name": call.get("name"), "args": shown(call.get("args"))}
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
        await emit("fields", {"field_changes": changes, "rejected": [*shown(reported), *refused]})
