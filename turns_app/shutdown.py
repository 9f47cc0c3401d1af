"""Stopping a serving process without cutting a turn short: refuse new turns,
let the running ones finish for a grace period, then abort the rest with a
`server_shutdown` error that their streams receive like any other outcome.

The signal handling and the listening sockets are the server's business
(agentsite.graceful_stop); this module knows only turns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.errors import ServerShutdown
from turns_app.running import RunningTurn

logger = logging.getLogger(__name__)

# After the grace period: how long the stopped turns get to write their abort
# (execution waits ERROR_WRITE_SECONDS for it before telling the clients).
STOP_SECONDS = 5.0
POLL_SECONDS = 0.25

_stopping = False


def stopping() -> bool:
    return _stopping


def refuse_if_stopping() -> None:
    """Called before a claim: a turn started now could not finish here."""
    if _stopping:
        raise ServerShutdown("the server is shutting down; retry (another server may take it)")


def begin() -> None:
    global _stopping
    _stopping = True


@dataclass(frozen=True)
class Drained:
    finished: int  # ended on their own within the grace period
    stopped: int  # aborted with server_shutdown


def tasks_of(runs: Sequence[RunningTurn]) -> set[asyncio.Task[str]]:
    return {run.task for run in runs if run.task is not None}


async def drain(running: Callable[[], Sequence[RunningTurn]], grace_seconds: float) -> Drained:
    """Wait up to `grace_seconds` for the turns `running()` lists (a claim
    that was under way when the stop began may still add one), then stop
    the rest with `server_shutdown` and wait for their aborts."""
    begin()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_seconds
    seen: set = set()
    while True:
        runs = [run for run in running() if run.task is not None]
        seen.update(run.turn_id for run in runs)
        left = deadline - loop.time()
        if not runs or left <= 0:
            break
        await asyncio.wait(tasks_of(runs), timeout=min(left, POLL_SECONDS))
    for run in runs:
        logger.warning("turn %s: still running after %g s; aborting it (server_shutdown)", run.turn_id, grace_seconds)
        run.stop(ServerShutdown())
    if runs:
        await asyncio.wait(tasks_of(runs), timeout=STOP_SECONDS)
    return Drained(finished=len(seen) - len(runs), stopped=len(runs))
