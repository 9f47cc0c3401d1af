"""What a turn tells the people who run the service: a log line when it
starts and when it ends (turn id, session, owner, outcome, error code,
duration; one JSON object each with LOG_FORMAT=json), and the Prometheus
metrics in core.metrics.

execution.py calls these at named points — started, first delta, replayed —
and the end is read from the turn's task, so the execution code carries no
bookkeeping of its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TypeVar
from uuid import UUID

from core import metrics
from core.errors import ApiError, ErrorCode
from turns_app.running import RunningTurn
from turns_app.types import Replay

logger = logging.getLogger("agentsite.turns")

Run = TypeVar("Run", bound=RunningTurn)


@dataclass
class _Watch:
    owner: str
    session: str
    started: float = field(default_factory=time.monotonic)
    first_delta: float | None = None


_watched: dict[UUID, _Watch] = {}


def _context(run: RunningTurn, watch: _Watch) -> dict:
    claim = run.claim
    return {
        "turn_id": str(claim.turn_id),
        "session": watch.session,
        "session_id": str(claim.session_id),
        "owner": watch.owner,
        "epoch": claim.epoch,
        "number": claim.number,
    }


def turn_started(run: Run, *, owner: str, key: str) -> Run:
    watch = _Watch(owner=owner, session=key)
    _watched[run.turn_id] = watch
    metrics.ACTIVE_TURNS.inc()
    logger.info(
        "turn %s started: session %s of %s, turn #%d",
        run.turn_id,
        key,
        owner,
        run.claim.number,
        extra={"event": "turn_started", **_context(run, watch)},
    )
    assert run.task is not None
    run.task.add_done_callback(lambda task: _ended(run, task))
    return run


def delta(turn_id: UUID) -> None:
    watch = _watched.get(turn_id)
    if watch is not None and watch.first_delta is None:
        watch.first_delta = time.monotonic()
        metrics.FIRST_DELTA_SECONDS.observe(watch.first_delta - watch.started)


def _outcome(run: RunningTurn, task: asyncio.Task) -> tuple[str, str]:
    """("committed", "") or ("aborted", error code), from how the task ended."""
    if task.cancelled():
        return "aborted", str(run.stop_reason.code if run.stop_reason else ErrorCode.TURN_CANCELLED)
    error = task.exception()
    if error is None:
        return "committed", ""
    if isinstance(error, ApiError):
        return "aborted", str(error.code)
    return "aborted", str(ErrorCode.INTERNAL_ERROR)


def _ended(run: RunningTurn, task: asyncio.Task) -> None:
    watch = _watched.pop(run.turn_id, None)
    metrics.ACTIVE_TURNS.dec()
    if watch is None:
        return
    outcome, code = _outcome(run, task)
    seconds = time.monotonic() - watch.started
    metrics.TURNS.labels(outcome=outcome, code=code).inc()
    metrics.TURN_SECONDS.labels(outcome=outcome).observe(seconds)
    logger.log(
        logging.INFO if outcome == "committed" else logging.WARNING,
        "turn %s %s%s in %.0f ms: session %s of %s",
        run.turn_id,
        outcome,
        f" ({code})" if code else "",
        seconds * 1000,
        watch.session,
        watch.owner,
        extra={
            "event": "turn_ended",
            **_context(run, watch),
            "outcome": outcome,
            "code": code or None,
            "duration_ms": round(seconds * 1000, 1),
            "first_delta_ms": (round((watch.first_delta - watch.started) * 1000, 1) if watch.first_delta else None),
        },
    )


def turn_replayed(replay: Replay, *, owner: str, key: str) -> Replay:
    metrics.TURNS.labels(outcome="replayed", code="").inc()
    logger.info(
        "turn %s replayed: session %s of %s",
        replay.turn_id,
        key,
        owner,
        extra={"event": "turn_replayed", "turn_id": str(replay.turn_id), "session": key, "owner": owner},
    )
    return replay
