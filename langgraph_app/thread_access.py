"""The project's resource handlers on threads (docs/configuration.md,
"Resource handlers"): every thread endpoint, HTTP, SSE or thread stream, asks
`threads.<action>` here before it reads or writes, as LangGraph's server
does. A handler's filter is matched by the database against the thread's
metadata; a thread it does not match is not found (404), as one that is not
there. With no AGENT_AUTH_PATH (or no handler) nothing is asked."""

from __future__ import annotations

from typing import Any

from assistants_app import selectors as assistants_read
from core.asyncdb import db
from langgraph_app.errors import thread_not_found
from sessions_app import selectors as sessions
from sessions_app.auth import Principal, authorize, uses_custom_auth

Where = dict[str, Any]


async def allowed(principal: Principal, action: str, value: dict[str, Any]) -> Where | None:
    """The `threads.<action>` handler's filter (None: all), or its refusal raised."""
    return await authorize(principal, "threads", action, value)


async def check_thread(principal: Principal, action: str, thread_id: str, /, **value: Any) -> None:
    """`threads.<action>` on one thread: refused, or the thread not matching
    the handler's filter (404), before anything is read or written."""
    where = await allowed(principal, action, {"thread_id": thread_id, **value})
    if where and not await db(sessions.session_matches, owner=principal.owner, key=thread_id, where=where):
        raise thread_not_found(thread_id)


# What LangGraph's server passes a create_run handler beside the run's own
# fields (Auth.types.RunsCreate); the rest of the body is its `kwargs`.
_RUN_FIELDS = ("assistant_id", "metadata", "multitask_strategy", "if_not_exists", "after_seconds")


async def run_allowed(principal: Principal, thread_id: str | None, body: Any) -> tuple[dict[str, Any], Where | None]:
    """`threads.create_run` for a run on `thread_id` (None: stateless): the
    run's metadata as the handler left it (what a thread the run makes is
    stamped with) and its filter, which the thread must match."""
    metadata = dict(body.metadata or {})
    if not uses_custom_auth():
        return metadata, None
    given = body.model_dump(mode="json", exclude_none=True)
    value: dict[str, Any] = {
        "thread_id": thread_id,
        "run_id": None,
        "status": "pending",
        "prevent_insert_if_inflight": True,
        **{name: getattr(body, name, None) for name in _RUN_FIELDS},
        "metadata": metadata,
        "kwargs": {k: v for k, v in given.items() if k not in _RUN_FIELDS},
    }
    where = await allowed(principal, "create_run", value)
    return dict(value["metadata"] or {}), where


async def assistant_readable(principal: Principal, assistant_id: str) -> Where | None:
    """The `assistants.read` filter a run's assistant must match, as
    LangGraph's server checks it for every run; a graph's system assistant
    is not asked about."""
    if not uses_custom_auth() or assistants_read.system_graph_of(assistant_id) is not None:
        return None
    return await authorize(principal, "assistants", "read", {"assistant_id": assistant_id})
