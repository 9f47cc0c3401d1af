"""GET /api/health: is the database there, and is the checkpointer usable?"""

from __future__ import annotations

import asyncio

from django.db import connection
from django.http import HttpRequest
from ninja import Router, Status

from agentsite.agent.checkpointer import ensure_tables_exist, get_saver
from agentsite.asyncdb import db

router = Router(tags=["health"])

PROBE_SECONDS = 3.0


def _database_ready() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    ensure_tables_exist()


async def _checkpointer_ready() -> None:
    saver = await get_saver()
    await saver.aget_tuple({"configurable": {"thread_id": "health", "checkpoint_ns": ""}})


@router.get("/health", auth=None, response={200: dict, 503: dict})
async def health(request: HttpRequest) -> Status:
    checks = {"database": "ok", "checkpointer": "ok"}
    try:
        # Bounded: during an outage a probe can wait on a pool for seconds, and
        # a load balancer needs a prompt "no" more than a late answer.
        await asyncio.wait_for(db(_database_ready), PROBE_SECONDS)
    except Exception as exc:
        checks["database"] = f"unavailable: {type(exc).__name__}"
    try:
        await asyncio.wait_for(_checkpointer_ready(), PROBE_SECONDS)
    except Exception as exc:
        checks["checkpointer"] = f"unavailable: {type(exc).__name__}"
    ok = all(v == "ok" for v in checks.values())
    return Status(200 if ok else 503, {"status": "ok" if ok else "unavailable", **checks})
