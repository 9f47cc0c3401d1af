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
from sessions_app import selectors as sessions
from sessions_app import services as session_services
from sessions_app.auth import authorize
from turns_app import selectors as turn_selectors
from turns_app import services as turn_services

lifecycle_router = Router(tags=["Threads"])


def _prune(owner: str, keys: list[str], strategy: str) -> int:
    # Every id is checked before anything is deleted: a bad one is a 422
    # with nothing written.
    for key in keys:
        sessions.check_session_key(key)
    pruned = 0
    for key in dict.fromkeys(keys):
        try:
            session = sessions.session_get(owner=owner, key=key)
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
    pruned = await db(_prune, owner=request.auth.owner, keys=payload.thread_ids, strategy=payload.strategy)
    return {"pruned_count": pruned}


def _storage(owner: str, key: str, scope: dict[str, Any] | None) -> dict[str, Any]:
    try:
        session = sessions.session_get(owner=owner, key=key)
    except SessionNotFound:
        raise thread_not_found(key) from None
    if scope and any(session.metadata.get(k) != v for k, v in scope.items()):
        raise thread_not_found(key)
    return {"thread_id": session.key, **turn_selectors.session_storage(session)}


@lifecycle_router.get("/threads/{thread_id}/storage", summary="What the thread's history occupies, in bytes")
async def get_thread_storage(request: AuthedRequest, thread_id: str):
    scope = await authorize(request.auth, "threads", "read", {"thread_id": thread_id})
    return await interruptible(_storage, owner=request.auth.owner, key=thread_id, scope=scope)
