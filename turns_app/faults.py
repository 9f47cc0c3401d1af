"""Fault-injection points for the crash tests (tests/system).

A point fires only when `settings.AGENT_FAULT_INJECTION` is on — set in
tests/settings.py and nowhere else — and the environment names it in
`AGENT_FAULT_POINT`. The action is `AGENT_FAULT_ACTION`: `kill` (SIGKILL this
process: the crash under test) or `raise`. In any other settings module this
is a no-op that reads nothing from the environment.
"""

from __future__ import annotations

import os
import signal

from django.conf import settings

POINTS = frozenset({"before_commit", "after_commit", "mid_stream"})


class InjectedFault(RuntimeError):
    pass


def enabled() -> bool:
    return bool(getattr(settings, "AGENT_FAULT_INJECTION", False))


def hit(point: str) -> None:
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}")
    if not enabled() or os.environ.get("AGENT_FAULT_POINT") != point:
        return
    if os.environ.get("AGENT_FAULT_ACTION", "kill") == "raise":
        raise InjectedFault(point)
    os.kill(os.getpid(), signal.SIGKILL)
