"""A protocol run that asked for the stream mode `events`: driven as
LangGraph's server drives it, by `graph.astream_events(..., version="v2")`
with the run's other stream modes. The root graph's own stream chunks
(`on_chain_stream` of the run itself) come back to the graph step in
`astream(version="v2")`'s part shape, so the turn's outcome and the other
modes' events are found exactly as for every other run; every other
event (chain, node, model and tool starts, streams and ends, the
subgraphs' included) is logged as one `events` event, LangGraph's own
event dict, in the turn's one id sequence.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from turns_app.native_json import dumps

EVENTS_MODE = "events"
Emit = Callable[[str, Any], Awaitable[None]]
INTERRUPT = "__interrupt__"
# LangSmith's mark of a run it hides; LangGraph's server leaves them out too.
HIDDEN_TAG = "langsmith:hidden"


async def parts(
    emit: Emit, graph: Any, run_input: Any, config: Any, *, subgraphs: bool = False, **kwargs: Any
) -> AsyncIterator[dict[str, Any]]:
    # The root run's id, to tell its own stream chunks from its children's.
    run_id = uuid.uuid4()
    kwargs.pop("version", None)  # astream's: astream_events drives astream's first form
    events = graph.astream_events(run_input, {**config, "run_id": run_id}, version="v2", subgraphs=subgraphs, **kwargs)
    async for event in events:
        if HIDDEN_TAG in (event.get("tags") or ()):
            continue
        if event.get("event") == "on_chain_stream" and event.get("run_id") == str(run_id):
            chunk = event["data"]["chunk"]
            ns, mode, data = chunk if subgraphs else ((), *chunk)
            yield _part(mode, tuple(ns), data)
        else:
            await emit(EVENTS_MODE, dumps(event))


def _part(mode: str, ns: tuple[str, ...], data: Any) -> dict[str, Any]:
    """A chunk of astream's first form as its v2 part: a `values` chunk
    holds the run's interrupts under `__interrupt__`, a v2 part beside it."""
    interrupts: tuple[Any, ...] = ()
    if mode == "values" and isinstance(data, dict) and INTERRUPT in data:
        data = dict(data)
        interrupts = tuple(data.pop(INTERRUPT))
    return {"type": mode, "ns": ns, "data": data, "interrupts": interrupts}
