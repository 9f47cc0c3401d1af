"""GET /api/health: can this process serve turns? The database answers and
the checkpointer's tables are there, at the schema the installed LangGraph
expects.

The probe never opens a checkpointer: during an outage that would start (and,
cancelled by the time limit, leak) a connection pool on every probe. It
reads the checkpointer's tables through Django's connection instead."""

from __future__ import annotations

import asyncio

from django.db import connection
from django.http import HttpRequest
from ninja import Router, Status

from core.asyncdb import probe
from turns_app import shutdown
from turns_app.checkpoint_tables import schema_problem

router = Router(tags=["health"])

# The whole answer, not each probe: a load balancer needs a prompt "no" more
# than a late answer.
PROBE_SECONDS = 3.0


def _probe() -> dict[str, str]:
    checks = {"database": "ok", "checkpointer": "ok"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    problem = schema_problem()
    if problem is not None:
        checks["checkpointer"] = f"unavailable: {problem}"
    return checks


@router.get("/health", auth=None, response={200: dict, 503: dict})
async def health(request: HttpRequest) -> Status:
    if shutdown.stopping():
        # A load balancer stops sending here while running turns finish.
        return Status(503, {"status": "stopping", "database": "unknown", "checkpointer": "unknown"})
    try:
        checks = await asyncio.wait_for(probe(_probe), PROBE_SECONDS)
    except TimeoutError:
        checks = {"database": f"unavailable: no answer within {PROBE_SECONDS:g} s", "checkpointer": "unknown"}
    except Exception as exc:
        checks = {"database": f"unavailable: {type(exc).__name__}", "checkpointer": "unknown"}
    ok = all(v == "ok" for v in checks.values())
    return Status(200 if ok else 503, {"status": "ok" if ok else "unavailable", **checks})
