"""A thread's lifecycle beyond create and delete (docs/agent-protocol.md,
"Thread lifecycle"): `POST /threads/prune` deletes threads through the
delete service (purge and tombstone, as `DELETE /threads/{id}`) or keeps
only their latest state, and `GET /threads/{id}/storage` tells what a
thread's history occupies. The TTL set on create and patch is threads_api's;
maintenance deletes the threads whose TTL ran out."""

from __future__ import annotations

from typing import Any

from ninja import Router

from core.asyncdb import db, interruptible
from core.errors import SessionNotFound
from langgraph_app.auth import AuthedRequest
from langgraph_app.errors import thread_not_found
from langgraph_app.schemas import ThreadPruneRequest
from langgraph_app.thread_access import Where, allowed
from sessions_app import selectors as sessions
from sessions_app import services as session_services
from turns_app import selectors as turn_selectors
from turns_app import services as turn_services

lifecycle_router = Router(tags=["Threads"])


def _prune(owner: str, keys: list[str], strategy: str, where: Where | None) -> int:
    # Every id is checked before anything is deleted: a bad one is a 422
    # with nothing written.
    for key in keys:
        sessions.check_session_key(key)
    if where and len(sessions.session_keys_matching(owner=owner, keys=keys, where=where)) < len(set(keys)):
        # As LangGraph's server: under a delete filter every thread must be
        # there and match it, or nothing is pruned.
        raise SessionNotFound("At least one thread not found or not authorized")
    pruned = 0
    for key in dict.fromkeys(keys):
        try:
            session = sessions.session_get(owner=owner, key=key, where=where)
            if strategy == "delete":
                session_services.session_delete(session_id=session.id)
            else:
                turn_services.session_history_prune(session_id=session.id)
        except SessionNotFound:
            continue  # as LangGraph's server: an unknown thread is skipped, not counted
        pruned += 1
    return pruned


@lifecycle_router.post("/threads/prune", summary="Delete threads, or keep only their latest state (keep_latest)")
async def prune_threads(request: AuthedRequest, payload: ThreadPruneRequest):
    where = await allowed(request.auth, "delete", {"thread_ids": list(payload.thread_ids)})
    pruned = await db(_prune, owner=request.auth.owner, keys=payload.thread_ids, strategy=payload.strategy, where=where)
    return {"pruned_count": pruned}


def _storage(owner: str, key: str, where: Where | None) -> dict[str, Any]:
    try:
        session = sessions.session_get(owner=owner, key=key, where=where)
    except SessionNotFound:
        raise thread_not_found(key) from None
    return {"thread_id": session.key, **turn_selectors.session_storage(session)}


@lifecycle_router.get("/threads/{thread_id}/storage", summary="What the thread's history occupies, in bytes")
async def get_thread_storage(request: AuthedRequest, thread_id: str):
    where = await allowed(request.auth, "read", {"thread_id": thread_id})
    return await interruptible(_storage, owner=request.auth.owner, key=thread_id, where=where)
