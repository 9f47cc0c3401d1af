"""A thread-stream run's events: LangGraph's native v3 protocol events
(`graph.astream_events(..., version="v3")`), logged as turn events, for
LangGraph's thread-stream protocol (langgraph_app.thread_events).

A run asks for them with `thread_stream` in its protocol options
(`request["protocol"]`; what `POST /threads/{id}/commands` `run.start`
sets). The graph step then calls `astream` here instead of
`graph.astream`: the run is driven by LangGraph's own v3 stream (its
StreamMux and transformers: values, updates, messages as content-block
events, custom, subgraph lifecycle), each protocol event is logged as one
`protocol` event in the turn's one id sequence — so any process can replay
it — and the root graph's `updates` and `values` are handed back to the
graph step in `astream(version="v2")`'s part shape, so the turn's outcome
is found exactly as for every other run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from turns_app import event_stream_parts
from turns_app.native_json import dumps
from turns_app.types import Claim

PROTOCOL_EVENT = "protocol"

Emit = Callable[[str, Any], Awaitable[None]]
# Protocol events pulled from the run ahead of the graph step's logging them.
PULL_AHEAD = 64


def wants_protocol_events(claim: Claim) -> bool:
    return bool((claim.request.get("protocol") or {}).get("thread_stream"))


def astream(claim: Claim, emit: Emit, graph: Any, run_input: Any, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
    """`graph.astream(run_input, config, **kwargs)`, or for a run that asked
    for protocol events, the same parts found in its v3 stream, or for one
    that asked for the stream mode `events`, in its astream_events
    (turns_app.event_stream_parts)."""
    if not wants_protocol_events(claim):
        if event_stream_parts.EVENTS_MODE in claim.stream_modes:
            return event_stream_parts.parts(emit, graph, run_input, config, **kwargs)
        return graph.astream(run_input, config, **kwargs)
    # v3 owns the stream modes and subgraphs; the rest (durability,
    # interrupt_before/after) goes to the run as it would to astream.
    kept = {k: v for k, v in kwargs.items() if k not in ("stream_mode", "version", "subgraphs")}
    return _v3_parts(emit, graph, run_input, config, kept)


async def _v3_parts(emit: Emit, graph: Any, run_input: Any, config: Any, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
    run = await graph.astream_events(run_input, config, version="v3", **kwargs)
    # The run is pulled by a task of our own: when the turn is cancelled,
    # `abort()` cancels that pull and waits for the graph to unwind before
    # the graph step lets go of the run's in-memory checkpoints. (Cancelled
    # in the middle of its own pull, the v3 stream leaves the graph
    # unwinding on its own, and its last checkpoint written to the
    # database's saver after the turn had gone.)
    pulled: asyncio.Queue[Any] = asyncio.Queue(maxsize=PULL_AHEAD)

    async def pull() -> None:
        try:
            async for event in run:
                await pulled.put(event)
        except Exception as error:
            await pulled.put(_Failed(error))
            return
        await pulled.put(_END)

    puller = asyncio.ensure_future(pull())
    try:
        while True:
            event = await pulled.get()
            if event is _END:
                break
            if isinstance(event, _Failed):
                raise event.error
            method = event.get("method")
            params = event.get("params") or {}
            namespace = list(params.get("namespace") or ())
            data = params.get("data")
            wire = wire_form(method, namespace, data)
            if wire is not None and namespace and method == "values" and params.get("interrupts"):
                # Where a subgraph's interrupt was raised: the thread stream
                # announces it there (langgraph_app.thread_events), once the
                # turn's commit made it pending. Kept in the log, not sent.
                wire["interrupt_ids"] = [getattr(i, "id", None) for i in params["interrupts"]]
            if wire is not None:
                await emit(PROTOCOL_EVENT, dumps(wire))
            if not namespace and method in ("updates", "values"):
                # A root `values` event carries the run's interrupts
                # (`params.interrupts`, LangGraph's ValuesTransformer's):
                # what tells a pause where no `updates` come.
                interrupts = tuple(params.get("interrupts") or ()) if method == "values" else ()
                yield {"type": method, "ns": (), "data": data, "interrupts": interrupts}
        await puller
    finally:
        if not puller.done():
            await run.abort()
            puller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await puller


class _Failed:
    def __init__(self, error: Exception) -> None:
        self.error = error


_END = object()


def wire_form(method: Any, namespace: list[str], data: Any) -> dict[str, Any] | None:
    """What the log keeps of one v3 event: {"method", "namespace", "data",
    "timestamp"} and, for messages, "node"; None for what the thread-stream
    protocol does not carry (whole-message tuples on `messages`: it carries
    the content-block events only, as LangGraph's server does)."""
    if not isinstance(method, str):
        return None
    wire: dict[str, Any] = {"method": method, "namespace": namespace, "timestamp": int(time.time() * 1000)}
    if method == "messages":
        payload, metadata = data if isinstance(data, tuple) and len(data) == 2 else (data, None)
        if not (isinstance(payload, dict) and isinstance(payload.get("event"), str)):
            return None
        wire["data"] = payload
        if isinstance(metadata, dict) and isinstance(metadata.get("langgraph_node"), str):
            wire["node"] = metadata["langgraph_node"]
        return wire
    if method == "lifecycle" and isinstance(data, dict) and isinstance(data.get("namespace"), list):
        # A subgraph's lifecycle comes on the root's channel naming the
        # subgraph in its data: on the wire it is the subgraph's event.
        wire["namespace"] = [str(s) for s in data["namespace"]]
    if method in ("values", "updates") and isinstance(data, dict) and "__interrupt__" in data:
        data = {**data, "__interrupt__": list(data["__interrupt__"])}
    wire["data"] = data
    return wire
