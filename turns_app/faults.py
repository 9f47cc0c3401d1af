"""Fault-injection points for the crash tests (tests/system).

A point fires only when `settings.AGENT_FAULT_INJECTION` is on — set in
tests/settings.py and nowhere else — and the environment names it in
`AGENT_FAULT_POINT`. The action is `AGENT_FAULT_ACTION`: `kill` (SIGKILL this
process: the crash under test), `raise`, or `stall` (a statement that runs
for minutes on this thread's connection: a read that outlives its client). In any other settings module this
is a no-op that reads nothing from the environment.
"""

from __future__ import annotations

import os
import signal

from django.conf import settings
from django.db import connection

POINTS = frozenset({"before_commit", "after_commit", "mid_stream", "search"})


STALL_POSTGRES = "SELECT pg_sleep(300)"
STALL_SQLITE = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000000) SELECT count(*) FROM n"
)


class InjectedFault(RuntimeError):
    pass


def enabled() -> bool:
    return bool(getattr(settings, "AGENT_FAULT_INJECTION", False))


def hit(point: str) -> None:
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}")
    if not enabled() or os.environ.get("AGENT_FAULT_POINT") != point:
        return
    action = os.environ.get("AGENT_FAULT_ACTION", "kill")
    if action == "raise":
        raise InjectedFault(point)
    if action == "stall":
        with connection.cursor() as cursor:
            cursor.execute(STALL_POSTGRES if connection.vendor == "postgresql" else STALL_SQLITE)
        return
    os.kill(os.getpid(), signal.SIGKILL)
