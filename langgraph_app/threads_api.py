"""The protocol's thread endpoints: threads are sessions (created, searched,
patched, copied, deleted through sessions_app's and turns_app's services),
their states and history are read by threads.py."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from ninja import Router

from core import metadata_filter
from core.asyncdb import db, interruptible
from core.errors import SessionExists, SessionNotFound, TurnCommitted
from langgraph_app import history, state_update, threads
from langgraph_app.auth import AuthedRequest
from langgraph_app.errors import not_supported, thread_not_found
from langgraph_app.ids import checkpoint_ref
from langgraph_app.params import page, select
from langgraph_app.schemas import (
    ThreadCountRequest,
    ThreadCreate,
    ThreadPatch,
    ThreadSearchRequest,
    ThreadStateCheckpointRequest,
    ThreadStateSearch,
    ThreadStateUpdate,
    thread_ttl,
)
from langgraph_app.thread_access import Where, allowed, check_thread
from sessions_app import selectors as sessions
from sessions_app import services as session_services
from turns_app import faults
from turns_app import services as turn_services

threads_router = Router(tags=["Threads"])


def _create_thread(owner: str, payload: ThreadCreate, where: Where | None) -> dict[str, Any]:
    ttl = thread_ttl(payload.ttl, default=True)
    if payload.supersteps:
        raise not_supported("supersteps")
    # An empty id is a bad key (422), not a request for a random one.
    key = payload.thread_id if payload.thread_id is not None else str(uuid.uuid4())
    metadata = payload.metadata or {}
    # Any JSON may sit under graph_id (it is metadata); only a registered
    # graph's name picks the thread's graph.
    named = metadata.get("graph_id")
    graph = named if isinstance(named, str) and named in settings.AGENT_GRAPHS else None
    try:
        session = session_services.session_create(owner=owner, key=key, metadata=metadata, graph=graph, **ttl)
    except SessionExists:
        if payload.if_exists != "do_nothing":
            raise SessionExists(f"Thread {key} already exists") from None
        try:
            session = sessions.session_get(owner=owner, key=key, where=where)
        except SessionNotFound:
            # Another caller's (by the create handler's filter): as LangGraph's server, a conflict.
            raise SessionExists(f"Thread {key} already exists") from None
    return threads.thread_json(session)


@threads_router.post("/threads", summary="Create a thread (a session)")
async def create_thread(request: AuthedRequest, payload: ThreadCreate):
    value: dict[str, Any] = {
        "thread_id": payload.thread_id,
        "metadata": dict(payload.metadata or {}),
        "if_exists": payload.if_exists,
    }
    where = await allowed(request.auth, "create", value)
    if where is not None or value["metadata"] != (payload.metadata or {}):
        # What the handler stamps wins over what the client sent (no forged owner).
        payload = payload.model_copy(update={"metadata": {**value["metadata"], **metadata_filter.stamp_of(where)}})
    return await db(_create_thread, owner=request.auth.owner, payload=payload, where=where)


async def _scoped(request: AuthedRequest, payload: ThreadSearchRequest | ThreadCountRequest) -> Where | None:
    """The search handler's filter, applied in the query beside the client's."""
    value = {"metadata": dict(payload.metadata or {}), "values": payload.values, "status": payload.status}
    return await allowed(request.auth, "search", {**value, "limit": getattr(payload, "limit", None)})


def _search(
    owner: str, payload: ThreadSearchRequest | ThreadCountRequest, where: Where | None, limit: int, offset: int
):
    faults.hit("search")
    if payload.values:
        raise not_supported("a values filter")
    if getattr(payload, "extract", None):
        raise not_supported("extract")
    if payload.status == "error":
        return [], 0  # a failed run commits nothing: no thread is ever in error
    sort_by = getattr(payload, "sort_by", None)
    if sort_by == "status":
        raise not_supported("sort_by status")
    order = "key" if sort_by == "thread_id" else sort_by or "updated_at"
    found, total = sessions.session_search(
        owner=owner,
        metadata=payload.metadata,
        keys=getattr(payload, "ids", None),
        state=payload.status,
        where=where,
        order_by=order,
        descending=getattr(payload, "sort_order", None) != "asc",
        limit=limit,
        offset=offset,
    )
    fields = getattr(payload, "select", None)
    with_values = not fields or "values" in fields
    return [select(threads.thread_json(s, with_values=with_values), fields) for s in found], total


@threads_router.post("/threads/search", summary="Search your threads (metadata: top-level keys equal)")
async def search_threads(request: AuthedRequest, payload: ThreadSearchRequest, response: HttpResponse):
    where = await _scoped(request, payload)
    found, total = await interruptible(
        _search, owner=request.auth.owner, payload=payload, where=where, limit=payload.limit, offset=payload.offset
    )
    response["X-Pagination-Total"] = str(total)
    if payload.offset + len(found) < total:
        response["X-Pagination-Next"] = str(payload.offset + payload.limit)
    return found


@threads_router.post("/threads/count")
async def count_threads(request: AuthedRequest, payload: ThreadCountRequest):
    where = await _scoped(request, payload)
    _, total = await interruptible(_search, owner=request.auth.owner, payload=payload, where=where, limit=1, offset=0)
    return total


def _get(owner: str, key: str, with_ttl: bool, where: Where | None) -> dict[str, Any]:
    """A thread; `with_ttl` (`?include=ttl`) adds its TTL, if it has one."""
    session = threads.thread_of(owner=owner, key=key, where=where)
    thread = threads.thread_json(session)
    if with_ttl and session.expires_at is not None:
        minutes, expires_at = session.ttl_minutes, threads.iso(session.expires_at)
        strategy = session.ttl_strategy or "delete"
        thread["ttl"] = {"strategy": strategy, "ttl_minutes": minutes, "expires_at": expires_at}
    return thread


@threads_router.get("/threads/{thread_id}", summary="A thread: metadata, status, current values")
async def get_thread(request: AuthedRequest, thread_id: str):
    where = await allowed(request.auth, "read", {"thread_id": thread_id})
    included = {part.strip() for part in (request.GET.get("include") or "").split(",")[:16]}
    return await db(_get, owner=request.auth.owner, key=thread_id, with_ttl="ttl" in included, where=where)


def _patch(owner: str, key: str, payload: ThreadPatch, where: Where | None) -> dict[str, Any]:
    ttl = thread_ttl(payload.ttl)
    if where and not sessions.session_matches(owner=owner, key=key, where=where):
        raise thread_not_found(key)
    try:
        session = session_services.session_merge_metadata(owner=owner, key=key, metadata=payload.metadata or {}, **ttl)
    except SessionNotFound:
        raise thread_not_found(key) from None
    return threads.thread_json(session)


@threads_router.patch("/threads/{thread_id}", summary="Merge metadata into a thread")
async def patch_thread(request: AuthedRequest, thread_id: str, payload: ThreadPatch):
    sessions.check_session_key(thread_id)
    value = {"thread_id": thread_id, "metadata": dict(payload.metadata or {})}
    where = await allowed(request.auth, "update", value)
    # The handler may stamp the metadata it merges, as on create.
    payload = payload.model_copy(update={"metadata": value["metadata"]})
    thread = await db(_patch, owner=request.auth.owner, key=thread_id, payload=payload, where=where)
    if "return=minimal" in (request.headers.get("Prefer") or ""):
        return HttpResponse(status=204)
    return thread


@threads_router.delete("/threads/{thread_id}", summary="Delete a thread: purge, keep a tombstone (204)")
async def delete_thread(request: AuthedRequest, thread_id: str):
    await check_thread(request.auth, "delete", thread_id)
    try:
        await db(session_services.session_delete_for_owner, owner=request.auth.owner, key=thread_id)
    except SessionNotFound:
        raise thread_not_found(thread_id) from None
    return HttpResponse(status=204)


def _copy(owner: str, key: str) -> dict[str, Any]:
    session = threads.thread_of(owner=owner, key=key)
    if session.interrupt is not None:
        raise TurnCommitted("a thread waiting on an interrupt cannot be copied: resume it first")
    copy = turn_services.session_fork(owner=owner, key=key, turn_id=session.head_turn_id, new_key=str(uuid.uuid4()))
    return threads.thread_json(copy)


@threads_router.post("/threads/{thread_id}/copy", summary="A new thread with this one's history")
async def copy_thread(request: AuthedRequest, thread_id: str):
    await check_thread(request.auth, "read", thread_id)
    # Whether the caller may make a thread at all (the filter is not needed).
    await allowed(request.auth, "create", {"thread_id": None, "metadata": {}, "if_exists": "raise"})
    return await db(_copy, owner=request.auth.owner, key=thread_id)


@threads_router.get("/threads/{thread_id}/state", summary="The thread's current state")
async def get_state(request: AuthedRequest, thread_id: str):
    await check_thread(request.auth, "read", thread_id)
    return await db(threads.thread_state, owner=request.auth.owner, key=thread_id)


@threads_router.post("/threads/{thread_id}/state/checkpoint", summary="The state at a checkpoint")
async def post_state_at(request: AuthedRequest, thread_id: str, payload: ThreadStateCheckpointRequest):
    if payload.checkpoint.checkpoint_ns:
        raise not_supported("a subgraph checkpoint (checkpoint_ns)")
    ref = checkpoint_ref(payload.checkpoint.checkpoint_id) if payload.checkpoint.checkpoint_id else None
    await check_thread(request.auth, "read", thread_id)
    return await db(threads.thread_state, owner=request.auth.owner, key=thread_id, ref=ref)


@threads_router.get("/threads/{thread_id}/state/{checkpoint_id}", summary="The state at a checkpoint")
async def get_state_at(request: AuthedRequest, thread_id: str, checkpoint_id: str):
    await check_thread(request.auth, "read", thread_id)
    return await db(threads.thread_state, owner=request.auth.owner, key=thread_id, ref=checkpoint_ref(checkpoint_id))


@threads_router.post("/threads/{thread_id}/state", summary="Update the thread's state (a turn: aupdate_state)")
async def update_state(request: AuthedRequest, thread_id: str, payload: ThreadStateUpdate):
    await check_thread(request.auth, "update", thread_id)
    return await state_update.update_state(
        owner=request.auth.owner,
        key=thread_id,
        payload=payload,
        idempotency_key=request.headers.get("Idempotency-Key"),
    )


def _history_response(owner: str, key: str, **query: Any) -> HttpResponse:
    body, next_before = history.history_page(owner=owner, key=key, **query)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    if next_before is not None:
        response[history.NEXT_HEADER] = next_before
    return response


@threads_router.post("/threads/{thread_id}/history", summary="The thread's states, newest first (paged by size too)")
async def post_history(request: AuthedRequest, thread_id: str, payload: ThreadStateSearch):
    await check_thread(request.auth, "read", thread_id)
    if payload.checkpoint is not None and payload.checkpoint.checkpoint_ns:
        return []  # no subgraphs, so no states in a subgraph namespace
    return await interruptible(
        _history_response,
        owner=request.auth.owner,
        key=thread_id,
        limit=payload.limit,
        before=history.parse_before(payload.before),
        metadata=payload.metadata,
    )


@threads_router.get("/threads/{thread_id}/history", summary="The thread's states, newest first (paged by size too)")
async def get_history(request: AuthedRequest, thread_id: str):
    limit, _ = page(request)
    await check_thread(request.auth, "read", thread_id)
    return await interruptible(
        _history_response,
        owner=request.auth.owner,
        key=thread_id,
        limit=limit,
        before=history.parse_before(request.GET.get("before")),
        metadata=None,
    )
