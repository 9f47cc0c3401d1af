"""LangGraph's own stream parts as turn events, for runs started through the
Agent Protocol (langgraph_app).

A protocol client asks for stream modes (`values`, `updates`,
`messages-tuple`, `custom`) whose chunks are LangGraph-native: full state
snapshots, node updates, message chunks with their metadata. The claim
carries the modes a run wants (`Claim.stream_modes`, from its request); the
graph step hands each part to `NativeParts`, which logs it as an event of the
same name in the turn's one id sequence — so a protocol stream can be resumed
from any process with Last-Event-ID like every other event. /api/ turns ask
for none: no `values` snapshot per step is serialized or stored for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.types import StreamMode, StreamPart

from turns_app.native_json import dumps
from turns_app.types import EVENT_OF_MODE, NATIVE_EVENTS

# The events native parts are logged as (the execution treats them like deltas).
EVENTS = NATIVE_EVENTS
Emit = Callable[[str, Any], Awaitable[None]]


class NativeParts:
    """Logs the parts of `graph.astream(..., version="v2")` a protocol run asked for."""

    def __init__(self, modes: frozenset[str], emit: Emit) -> None:
        self.events = frozenset(EVENT_OF_MODE[m] for m in modes)
        self.emit = emit

    @property
    def wanted(self) -> bool:
        return bool(self.events)

    @property
    def wants_messages(self) -> bool:
        return "messages" in self.events

    @property
    def extra_stream_modes(self) -> list[StreamMode]:
        """LangGraph stream modes the graph step does not ask for itself."""
        return ["custom"] if "custom" in self.events else []

    async def log(self, part: StreamPart) -> None:
        kind = part["type"]
        data: Any = part["data"]
        # The graph step runs the root graph only (no subgraphs=True): every
        # part is the root's, so no `mode|namespace` event names.
        event = "messages" if kind == "messages" else kind
        if event not in self.events:
            return
        if part["type"] == "messages":
            chunk, metadata = data
            data = [chunk, {k: v for k, v in (metadata or {}).items() if not str(k).startswith("__")}]
        elif part["type"] == "updates" and isinstance(data, dict) and "__interrupt__" in data:
            data = {**data, "__interrupt__": list(data["__interrupt__"])}
        elif part["type"] == "values" and part.get("interrupts") and isinstance(data, dict):
            # v2 parts carry interrupts beside the state; LangGraph's server
            # (and useStream, which reads them) has them in the values.
            data = {**data, "__interrupt__": list(part["interrupts"])}
        await self.emit(event, dumps(data))
