"""LangGraph's own stream parts as turn events, for runs started through the
Agent Protocol (langgraph_app).

A protocol client asks for stream modes (`values`, `updates`,
`messages-tuple`, `custom`) whose chunks are LangGraph-native: full state
snapshots, node updates, message chunks with their metadata. A protocol run's
request names the modes it wants (`request["protocol"]["stream_mode"]`); the
graph step hands each part to `NativeParts`, which logs it as an event of the
same name in the turn's one id sequence — so a protocol stream can be resumed
from any process with Last-Event-ID like every other event. /api/ turns ask
for none: no `values` snapshot per step is serialized or stored for them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.types import Interrupt
from pydantic import BaseModel

# Protocol stream mode -> the event name it is logged (and sent) as.
EVENT_OF_MODE = {"values": "values", "updates": "updates", "messages-tuple": "messages", "custom": "custom"}
EVENTS = frozenset(EVENT_OF_MODE.values())
# A value with no JSON form is shown as its repr, cut to this length.
REPR_MAX = 200

Emit = Callable[[str, Any], Awaitable[None]]


def dumps(value: Any) -> str:
    """JSON text the way LangGraph's server writes its chunks: messages and
    other pydantic models as `model_dump()`, interrupts as {"value", "id"}."""
    return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":"))


def _default(value: Any) -> Any:
    if isinstance(value, Interrupt):
        return {"value": value.value, "id": value.id}
    if isinstance(value, BaseModel):  # BaseMessage included
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)[:REPR_MAX]


def requested_modes(request: dict[str, Any]) -> frozenset[str]:
    """The protocol stream modes a turn's request asked to be logged."""
    protocol = request.get("protocol")
    modes = protocol.get("stream_mode") if isinstance(protocol, dict) else None
    return frozenset(m for m in modes or () if m in EVENT_OF_MODE)


class NativeParts:
    """Logs the parts of `graph.astream(..., version="v2")` a protocol run asked for."""

    def __init__(self, request: dict[str, Any], emit: Emit) -> None:
        self.events = frozenset(EVENT_OF_MODE[m] for m in requested_modes(request))
        self.emit = emit

    @property
    def wanted(self) -> bool:
        return bool(self.events)

    @property
    def wants_messages(self) -> bool:
        return "messages" in self.events

    @property
    def extra_stream_modes(self) -> list[str]:
        """LangGraph stream modes the graph step does not ask for itself."""
        return ["custom"] if "custom" in self.events else []

    async def log(self, part: dict[str, Any]) -> None:
        kind, data = part["type"], part["data"]
        # The graph step runs the root graph only (no subgraphs=True): every
        # part is the root's, so no `mode|namespace` event names.
        event = "messages" if kind == "messages" else kind
        if event not in self.events:
            return
        if kind == "messages":
            chunk, metadata = data
            data = [chunk, {k: v for k, v in (metadata or {}).items() if not str(k).startswith("__")}]
        elif kind == "updates" and isinstance(data, dict) and "__interrupt__" in data:
            data = {**data, "__interrupt__": list(data["__interrupt__"])}
        elif kind == "values" and part.get("interrupts") and isinstance(data, dict):
            # v2 parts carry interrupts beside the state; LangGraph's server
            # (and useStream, which reads them) has them in the values.
            data = {**data, "__interrupt__": list(part["interrupts"])}
        await self.emit(event, dumps(data))


def message_json(message: BaseMessage) -> dict[str, Any]:
    return json.loads(dumps(message))
