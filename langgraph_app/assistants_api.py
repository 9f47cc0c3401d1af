"""The protocol's assistants (assistants_app): each owner's own, created,
patched (a new version each time), versioned and deleted as LangGraph's
server does it, and one system assistant per registered graph (its name or
its UUID, read-only). Another owner's assistant is a 404. The project's
`@auth.on.assistants` handlers are asked first (docs/configuration.md,
"Resource handlers"): their filter is in the query, an assistant it does
not match a 404 as well."""

from __future__ import annotations

import json
import re
from typing import Any

from django.http import HttpResponse
from ninja import Router

from assistants_app import selectors as assistants_read
from assistants_app import services as assistants_write
from core import metadata_filter
from core.asyncdb import db
from core.errors import ValidationFailed
from graphs.runtime.registry import build_graph, describe
from langgraph_app.auth import AuthedRequest
from langgraph_app.errors import not_supported
from langgraph_app.params import TRUE, flag, select
from langgraph_app.schemas import (
    AssistantCountRequest,
    AssistantCreate,
    AssistantPatch,
    AssistantSearchRequest,
    AssistantVersionChange,
    AssistantVersionsRequest,
)
from sessions_app.auth import authorize
from turns_app.native_json import dumps

assistants = Router(tags=["Assistants"])
XRAY_DEPTH = re.compile(r"[0-9]{1,2}")
FALSE = frozenset({"0", "false", "no", "off"})


def assistant_json(row: Any) -> dict[str, Any]:
    """An assistant, or one of its versions (which has no updated_at)."""
    parent = getattr(row, "assistant", None)
    out = {
        "assistant_id": str(parent.assistant_id if parent is not None else row.assistant_id),
        "graph_id": row.graph_id,
        "config": row.config,
        "context": row.context,
        "metadata": row.metadata,
        "name": row.name,
        "description": row.description,
        "version": row.version,
        "created_at": row.created_at.isoformat(),
    }
    if parent is None:
        out["updated_at"] = row.updated_at.isoformat()
    return out


def _config(payload: AssistantCreate | AssistantPatch) -> dict[str, Any] | None:
    return None if payload.config is None else payload.config.model_dump(exclude_none=True)


@assistants.post("/assistants", summary="Create an assistant: a graph with its own config, context and metadata")
async def create_assistant(request: AuthedRequest, payload: AssistantCreate):
    value: dict[str, Any] = {
        "assistant_id": payload.assistant_id,
        "graph_id": payload.graph_id,
        "config": _config(payload) or {},
        "context": payload.context or {},
        "metadata": dict(payload.metadata or {}),
        "if_exists": payload.if_exists,
        "name": payload.name,
        "description": payload.description,
    }
    where = await _allowed(request, "create", value)
    # What the handler stamps wins over what the client sent, as for threads.
    metadata = {**(value["metadata"] or {}), **metadata_filter.stamp_of(where)}
    row, _ = await db(
        assistants_write.assistant_create,
        owner=request.auth.owner,
        graph_id=payload.graph_id,
        assistant_id=payload.assistant_id,
        config=_config(payload),
        context=payload.context,
        metadata=metadata,
        name=payload.name,
        description=payload.description,
        if_exists=payload.if_exists,
        where=where,
    )
    return assistant_json(row)


async def _allowed(request: AuthedRequest, action: str, value: dict[str, Any]) -> dict[str, Any] | None:
    return await authorize(request.auth, "assistants", action, value)


async def _filters(
    request: AuthedRequest, payload: AssistantSearchRequest | AssistantCountRequest
) -> assistants_read.AssistantFilter:
    value = {"graph_id": payload.graph_id, "metadata": dict(payload.metadata or {})}
    where = await _allowed(request, "search", {**value, "limit": getattr(payload, "limit", None)})
    return assistants_read.AssistantFilter(
        graph_id=payload.graph_id, name=payload.name, metadata=payload.metadata, where=where
    )


@assistants.post("/assistants/search", summary="Your assistants and the system ones")
async def search_assistants(request: AuthedRequest, payload: AssistantSearchRequest, response: HttpResponse):
    found, total = await db(
        assistants_read.assistant_search,
        owner=request.auth.owner,
        filters=await _filters(request, payload),
        sort_by=payload.sort_by,
        descending=payload.sort_order != "asc",
        limit=payload.limit,
        offset=payload.offset,
    )
    response["X-Pagination-Total"] = str(total)
    if payload.offset + len(found) < total:
        response["X-Pagination-Next"] = str(payload.offset + payload.limit)
    return [select(assistant_json(a), payload.select) for a in found]


@assistants.post("/assistants/count")
async def count_assistants(request: AuthedRequest, payload: AssistantCountRequest):
    filters = await _filters(request, payload)
    return await db(assistants_read.assistant_count, owner=request.auth.owner, filters=filters)


def _get(owner: str, assistant_id: str, where: dict[str, Any] | None) -> dict[str, Any]:
    return assistant_json(assistants_read.assistant_get(owner=owner, assistant_id=assistant_id, where=where))


async def _readable(request: AuthedRequest, assistant_id: str) -> dict[str, Any] | None:
    return await _allowed(request, "read", {"assistant_id": assistant_id})


@assistants.get("/assistants/{assistant_id}", summary="An assistant: its UUID, or a graph name for its system one")
async def get_assistant(request: AuthedRequest, assistant_id: str):
    where = await _readable(request, assistant_id)
    return await db(_get, owner=request.auth.owner, assistant_id=assistant_id, where=where)


@assistants.patch("/assistants/{assistant_id}", summary="A new version of an assistant (metadata merged)")
async def patch_assistant(request: AuthedRequest, assistant_id: str, payload: AssistantPatch):
    value = {
        "assistant_id": assistant_id,
        "graph_id": payload.graph_id,
        "config": _config(payload),
        "context": payload.context,
        "metadata": None if payload.metadata is None else dict(payload.metadata),
        "name": payload.name,
        "description": payload.description,
    }
    where = await _allowed(request, "update", value)
    row = await db(
        assistants_write.assistant_patch,
        owner=request.auth.owner,
        assistant_id=assistant_id,
        graph_id=payload.graph_id,
        config=_config(payload),
        context=payload.context,
        metadata=value["metadata"],
        name=payload.name,
        description=payload.description,
        where=where,
    )
    return assistant_json(row)


@assistants.delete("/assistants/{assistant_id}", response={204: None}, summary="Delete an assistant, every version")
async def delete_assistant(request: AuthedRequest, assistant_id: str):
    if flag(request, "delete_threads"):
        raise not_supported("delete_threads")
    where = await _allowed(request, "delete", {"assistant_id": assistant_id})
    await db(assistants_write.assistant_delete, owner=request.auth.owner, assistant_id=assistant_id, where=where)
    return 204, None


@assistants.post("/assistants/{assistant_id}/versions", summary="An assistant's versions, newest first")
async def assistant_versions(request: AuthedRequest, assistant_id: str, payload: AssistantVersionsRequest):
    where = await _readable(request, assistant_id)
    found = await db(
        assistants_read.assistant_versions,
        owner=request.auth.owner,
        assistant_id=assistant_id,
        metadata=payload.metadata,
        limit=payload.limit,
        offset=payload.offset,
        where=where,
    )
    return [assistant_json(v) for v in found]


@assistants.post("/assistants/{assistant_id}/latest", summary="Make one of an assistant's versions its current one")
async def set_latest_version(request: AuthedRequest, assistant_id: str, payload: AssistantVersionChange):
    where = await _allowed(request, "update", {"assistant_id": assistant_id, "version": payload.version})
    row = await db(
        assistants_write.assistant_set_latest,
        owner=request.auth.owner,
        assistant_id=assistant_id,
        version=payload.version,
        where=where,
    )
    return assistant_json(row)


def _graph_of(owner: str, assistant_id: str, where: dict[str, Any] | None) -> str:
    return assistants_read.assistant_get(owner=owner, assistant_id=assistant_id, where=where).graph_id


async def _graph_readable(request: AuthedRequest, assistant_id: str) -> str:
    where = await _readable(request, assistant_id)
    return await db(_graph_of, owner=request.auth.owner, assistant_id=assistant_id, where=where)


def _drawable(graph: str, xray: bool | int) -> dict[str, Any]:
    return json.loads(dumps(build_graph(graph, checkpointer=None).get_graph(xray=xray).to_json()))


@assistants.get("/assistants/{assistant_id}/graph", summary="The graph's nodes and edges")
async def get_assistant_graph(request: AuthedRequest, assistant_id: str):
    xray = _xray(request.GET.get("xray"))
    graph = await _graph_readable(request, assistant_id)
    return await db(_drawable, graph=graph, xray=xray)


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
async def get_assistant_schemas(request: AuthedRequest, assistant_id: str):
    graph = await _graph_readable(request, assistant_id)
    return await db(_schemas, graph=graph)


@assistants.get("/assistants/{assistant_id}/subgraphs", summary="Subgraphs: none (graphs run as one)")
async def get_assistant_subgraphs(request: AuthedRequest, assistant_id: str):
    await _graph_readable(request, assistant_id)
    return {}
