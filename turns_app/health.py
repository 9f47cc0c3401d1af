"""GET /api/health: can this process serve turns? The database answers and
the checkpointer's tables are there, at the schema the installed LangGraph
expects.

The probe never opens a checkpointer: during an outage that would start (and,
cancelled by the time limit, leak) a connection pool on every probe. It
reads the checkpointer's tables through Django's connection instead.

Three doors (docs/operations.md, "Health"): the API's route, on the event
loop; the health port (core.http.health_port), on a thread of its own with
a database connection of its own (`PortProbe`), which a busy loop and busy
database threads do not delay; and, on daphne's port ahead of the route,
`early_answer`: a `PortProbe`'s answer kept fresh by a thread
(core.http.health_early)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from typing import Any

from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend
from django.http import HttpRequest
from ninja import Router, Status

from core.asyncdb import probe
from core.database import is_postgres
from core.http.health_early import Refreshed
from core.http.health_port import Heartbeat
from turns_app import shutdown
from turns_app.checkpoint_tables import schema_problem

router = Router(tags=["health"])

# The whole answer, not each probe: a load balancer needs a prompt "no" more
# than a late answer.
PROBE_SECONDS = 3.0
# How long the health port trusts a checkpointer schema it found sound.
SCHEMA_SECONDS = 10.0
STOPPING = {"status": "stopping", "database": "unknown", "checkpointer": "unknown"}


def _checks(conn: BaseDatabaseWrapper, *, schema: bool = True) -> dict[str, str]:
    checks = {"database": "ok", "checkpointer": "ok"}
    with conn.cursor() as cursor:
        cursor.execute("SELECT 1")
    problem = schema_problem(conn=conn) if schema else None
    if problem is not None:
        checks["checkpointer"] = f"unavailable: {problem}"
    return checks


def _probe() -> dict[str, str]:
    return _checks(connection)


def _answer(checks: dict[str, str]) -> tuple[int, dict[str, str]]:
    ok = all(v == "ok" for v in checks.values())
    return 200 if ok else 503, {"status": "ok" if ok else "unavailable", **checks}


@router.get("/health", auth=None, response={200: dict, 503: dict})
async def health(request: HttpRequest) -> Status:
    if shutdown.stopping():
        # A load balancer stops sending here while running turns finish.
        return Status(503, STOPPING)
    try:
        checks = await asyncio.wait_for(probe(_probe), PROBE_SECONDS)
    except TimeoutError:
        checks = {"database": f"unavailable: no answer within {PROBE_SECONDS:g} s", "checkpointer": "unknown"}
    except Exception as exc:
        checks = {"database": f"unavailable: {type(exc).__name__}", "checkpointer": "unknown"}
    return Status(*_answer(checks))


class PortProbe:
    """The health port's answer (core.http.health_port), on its thread.

    Its database connection is its own, made on first use and kept open:
    not the pool's (whose connections the steps of a burst hold), not the
    probe threads' (a hop there and back costs a busy process tens of
    milliseconds). Its statements and its connecting are bounded by
    PROBE_SECONDS on PostgreSQL; on SQLite `SELECT 1` and reading the
    schema take no lock a writer holds (WAL). A connection that failed is
    dropped and made again by the next probe. The loop's heartbeat says
    whether the event loop still keeps time."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self.heartbeat = heartbeat
        self._conn: BaseDatabaseWrapper | None = None
        self._schema_ok_at = -SCHEMA_SECONDS

    def __call__(self) -> tuple[int, dict[str, Any]]:
        if shutdown.stopping():
            return 503, STOPPING
        stalled = self.heartbeat.stalled_for()
        if stalled > PROBE_SECONDS:
            loop = f"stalled for {stalled:.1f} s"
            return 503, {"status": "unavailable", "event_loop": loop, "database": "unknown", "checkpointer": "unknown"}
        try:
            # The schema moves only forward (a migrate), so a sound one is
            # read again every SCHEMA_SECONDS, not every probe: on
            # PostgreSQL that is two round trips of three.
            now = time.monotonic()
            schema = now - self._schema_ok_at > SCHEMA_SECONDS
            checks = _checks(self._connection(), schema=schema)
            if schema and checks["checkpointer"] == "ok":
                self._schema_ok_at = now
        except Exception as exc:  # as the route answers it: unavailable, and why
            self.close()
            checks = {"database": f"unavailable: {type(exc).__name__}", "checkpointer": "unknown"}
        return _answer(checks)

    def _connection(self) -> BaseDatabaseWrapper:
        if self._conn is None:
            settings_dict = copy.deepcopy(connections["default"].settings_dict)
            options = settings_dict.setdefault("OPTIONS", {})
            options.pop("pool", None)
            if is_postgres(settings_dict):
                options["connect_timeout"] = int(PROBE_SECONDS)
                options.setdefault("options", f"-c statement_timeout={int(PROBE_SECONDS * 1000)}")
            self._conn = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias="health")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            # Its thread may be gone (a test closes it after the port stopped).
            conn.inc_thread_sharing()
            with contextlib.suppress(Exception):  # a connection that died has nothing left to close
                conn.close()


# The route's answer kept fresh by a thread (core.http.health_early), once
# the server started it (agentsite.startup).
refreshed: Refreshed | None = None


def early_answer() -> tuple[int, dict[str, Any]] | None:
    """What daphne's port answers before the route, if it can: 503
    stopping at once, else the latest answer while it is fresh."""
    if shutdown.stopping():
        return 503, STOPPING
    return refreshed.fresh() if refreshed is not None else None
