"""The protocol's assistants: the registered graphs, read-only. An
assistant id is a graph name or its UUID (ids.py)."""

from __future__ import annotations

import asyncio
import functools
import json
import re
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Router

from core.errors import SessionNotFound, ValidationFailed
from graphs.runtime.registry import build_graph, describe
from langgraph_app.ids import UnknownAssistant, assistant_id, graph_of_assistant
from langgraph_app.params import TRUE, select
from langgraph_app.schemas import AssistantCountRequest, AssistantSearchRequest
from turns_app.native_json import dumps

# Assistants are the registered graphs: they exist as long as the process.
REGISTERED_AT = datetime.now(UTC).isoformat()

assistants = Router(tags=["Assistants"])
XRAY_DEPTH = re.compile(r"[0-9]{1,2}")
FALSE = frozenset({"0", "false", "no", "off"})


@functools.lru_cache(maxsize=64)
def _description(graph: str) -> str | None:
    return describe(graph)["description"] or None


def _assistant(graph: str) -> dict[str, Any]:
    return {
        "assistant_id": assistant_id(graph),
        "graph_id": graph,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "name": graph,
        "description": _description(graph),
        "version": 1,
        "created_at": REGISTERED_AT,
        "updated_at": REGISTERED_AT,
    }


def _graph_or_404(raw: str) -> str:
    try:
        return graph_of_assistant(raw)
    except UnknownAssistant:
        raise SessionNotFound(f"Assistant {raw[:80]} not found") from None


def _assistants(filters: AssistantSearchRequest | AssistantCountRequest) -> list[dict[str, Any]]:
    found = [_assistant(graph) for graph in settings.AGENT_GRAPHS]
    if filters.graph_id is not None:
        found = [a for a in found if a["graph_id"] == filters.graph_id]
    if filters.name is not None:
        found = [a for a in found if filters.name.lower() in a["name"].lower()]
    if filters.metadata:
        found = [a for a in found if all(a["metadata"].get(k) == v for k, v in filters.metadata.items())]
    return found


@assistants.post("/assistants/search", summary="The registered graphs, as assistants")
async def search_assistants(request: HttpRequest, payload: AssistantSearchRequest):
    found = await asyncio.to_thread(_assistants, payload)
    sort_by = payload.sort_by
    if sort_by:
        found.sort(key=lambda a: str(a[sort_by]), reverse=payload.sort_order == "desc")
    return [select(a, payload.select) for a in found[payload.offset : payload.offset + payload.limit]]


@assistants.post("/assistants/count")
async def count_assistants(request: HttpRequest, payload: AssistantCountRequest):
    return len(await asyncio.to_thread(_assistants, payload))


@assistants.get("/assistants/{assistant_id}", summary="An assistant: a graph name or its UUID")
async def get_assistant(request: HttpRequest, assistant_id: str):
    return await asyncio.to_thread(_assistant, _graph_or_404(assistant_id))


def _drawable(graph: str, xray: bool | int) -> dict[str, Any]:
    return json.loads(dumps(build_graph(graph, checkpointer=None).get_graph(xray=xray).to_json()))


@assistants.get("/assistants/{assistant_id}/graph", summary="The graph's nodes and edges")
async def get_assistant_graph(request: HttpRequest, assistant_id: str):
    graph = _graph_or_404(assistant_id)
    return await asyncio.to_thread(_drawable, graph, _xray(request.GET.get("xray")))


def _xray(raw: str | None) -> bool | int:
    """A boolean, or how many levels of subgraphs to draw (1-16)."""
    text = (raw or "false").strip().lower()
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    if XRAY_DEPTH.fullmatch(text) and int(text) <= 16:
        return int(text) or False
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise ValidationFailed("xray must be true, false or a depth from 0 to 16")


def _schemas(graph: str) -> dict[str, Any]:
    compiled = build_graph(graph, checkpointer=None)
    described = describe(graph)

    def schema(get) -> Any:
        try:
            return get()
        except Exception:  # a channel type pydantic cannot describe
            return None

    return {
        "graph_id": graph,
        "input_schema": described["input_schema"],
        "output_schema": schema(compiled.get_output_jsonschema),
        "state_schema": described["state_schema"],
        "config_schema": schema(compiled.get_config_jsonschema),
        "context_schema": schema(compiled.get_context_jsonschema),
    }


@assistants.get("/assistants/{assistant_id}/schemas", summary="The graph's JSON Schemas")
async def get_assistant_schemas(request: HttpRequest, assistant_id: str):
    return await asyncio.to_thread(_schemas, _graph_or_404(assistant_id))


@assistants.get("/assistants/{assistant_id}/subgraphs", summary="Subgraphs: none (graphs run as one)")
async def get_assistant_subgraphs(request: HttpRequest, assistant_id: str):
    _graph_or_404(assistant_id)
    return {}
