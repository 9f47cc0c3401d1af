"""LangGraph values as JSON text, the way LangGraph's server writes them:
what the graph step logs of a protocol run's stream parts, and what the
Agent Protocol (langgraph_app) answers of messages and graph drawings, in
the one form."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.types import Interrupt
from pydantic import BaseModel

# A value with no JSON form is shown as its repr, cut to this length.
REPR_MAX = 200


def dumps(value: Any) -> str:
    """Messages and other pydantic models as `model_dump()`, interrupts as
    {"value", "id"}, dataclasses as dicts, sets as lists."""
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


def message_json(message: BaseMessage) -> dict[str, Any]:
    return json.loads(dumps(message))
