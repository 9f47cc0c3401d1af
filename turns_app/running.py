"""The turns this process is running now, and what the code around a running
turn may ask of one (`RunningTurn`). Below execution.py, which registers its
runs here, and beside observability.py (a run's log lines and metrics) and
shutdown.py (stopping the runs on a graceful stop), which read them: neither
needs to import the run itself."""

from __future__ import annotations

import asyncio
from typing import Protocol
from uuid import UUID

from core.errors import ApiError
from turns_app.types import Claim


class RunningTurn(Protocol):
    """A claimed turn and the task that runs it (execution.TurnRun)."""

    claim: Claim
    task: asyncio.Task[str] | None
    # Why this server cancelled the run (None: its caller did).
    stop_reason: ApiError | None

    @property
    def turn_id(self) -> UUID: ...

    def stop(self, reason: ApiError) -> None: ...


# asyncio keeps only weak references to tasks: this registry keeps a turn
# alive after the request that started it.
_running: dict[UUID, RunningTurn] = {}


def register(run: RunningTurn) -> None:
    _running[run.turn_id] = run


def forget(turn_id: UUID) -> None:
    _running.pop(turn_id, None)


def running_task(turn_id: UUID) -> asyncio.Task | None:
    """The task running `turn_id` here, if this process runs it."""
    run = _running.get(turn_id)
    return run.task if run is not None else None


def running_turns() -> list[RunningTurn]:
    """The turns this process is running now."""
    return list(_running.values())
