"""Waiting for a busy session: a claim refused because another turn holds
the session is made again when that turn ends, not on a polling timer.

The refusal names the holder. If it runs in this process, its end is the
end of its task. If it runs elsewhere, its final event (`done` or `error`,
written in the commit or abort transaction) rings the event log's wake-up
(PostgreSQL NOTIFY; in-process on SQLite); the waiter subscribes *before*
claiming again, so an end between the refusal and the subscription is seen
by that claim. A short cap on every wait is the safety net for a lost
wake-up (a LISTEN connection that dropped) or a holder whose lease ran out.

Waiters of one session in one process queue in arrival order (a turnstile,
FIFO as asyncio's locks are): only the first of them claims when the holder
ends. Woken all at once, they raced for the row lock and the loser waited
again, so one unlucky client could wait many turns in a row (the
same-session p99 in docs/scale.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from django.conf import settings

from core import metrics
from core.asyncdb import db
from core.errors import SessionBusy
from turns_app import wakeups

T = TypeVar("T")

# The longest a waiter sleeps without a wake-up before claiming again.
WAIT_CAP_SECONDS = 0.25
# Without a known holder: polling, from this delay doubling up to the cap.
FIRST_POLL_SECONDS = 0.02


async def claim_when_free(
    claim: Callable[..., T], /, *, running: Callable[[UUID], asyncio.Task | None], **kwargs: Any
) -> T:
    """`db(claim, **kwargs)`, made again whenever the turn holding the session
    ends, for up to AGENT_SESSION_WAIT_SECONDS; then the `session_busy` goes
    to the client. `running(turn_id)`: the task running that turn in this
    process, if any."""
    started = time.monotonic()
    deadline = started + settings.AGENT_SESSION_WAIT_SECONDS
    # Per event loop: asyncio's locks belong to one (tests run several).
    session = (asyncio.get_running_loop(), kwargs.get("owner"), kwargs.get("key"))
    turnstile = _Turnstile.join(session)
    try:
        queued = turnstile.lock.locked()
        if not await turnstile.enter(deadline):
            # Still behind the claims queued before this one.
            metrics.session_busy_wait(started, acquired=False)
            raise SessionBusy()
        try:
            claimed = await db(claim, **kwargs)
        except SessionBusy as refused:
            return await _wait_and_claim(claim, refused, started, deadline, running, kwargs)
        finally:
            turnstile.lock.release()
    finally:
        turnstile.leave(session)
    if queued:
        metrics.session_busy_wait(started, acquired=True)
    return claimed


async def _wait_and_claim(
    claim: Callable[..., T],
    busy: SessionBusy,
    started: float,
    deadline: float,
    running: Callable[[UUID], asyncio.Task | None],
    kwargs: dict[str, Any],
) -> T:
    poll = FIRST_POLL_SECONDS

    def left() -> float:
        return deadline - time.monotonic()

    while True:
        if left() <= 0:
            metrics.session_busy_wait(started, acquired=False)
            raise busy
        holder = busy.holder
        task = running(holder) if holder is not None else None
        try:
            if task is not None:
                # Done once its commit or abort returned: the session is free.
                await asyncio.wait({task}, timeout=min(WAIT_CAP_SECONDS, left()))
                result = await db(claim, **kwargs)
            elif holder is None:
                await asyncio.sleep(min(poll, left()))
                poll = min(poll * 2, WAIT_CAP_SECONDS)
                result = await db(claim, **kwargs)
            else:
                result = await _claim_when_rung(claim, holder, left, kwargs)
        except SessionBusy as refused:
            busy = refused
            continue
        metrics.session_busy_wait(started, acquired=True)
        return result


async def _claim_when_rung(
    claim: Callable[..., T], holder: UUID, left: Callable[[], float], kwargs: dict[str, Any]
) -> T:
    """Claims under a subscription to the holder's events until the claim
    goes through or names another holder (raised, for the caller)."""
    async with wakeups.subscription(holder) as rung:
        while True:
            try:
                return await db(claim, **kwargs)
            except SessionBusy as refused:
                if refused.holder != holder or left() <= 0:
                    raise
            # Any event of the holder rings (its deltas too): claiming again
            # costs one short transaction, and the end is never missed.
            await rung.wait(min(WAIT_CAP_SECONDS, left()))


class _Turnstile:
    """One process's queue of claims for one session, entered from a claim's
    first try and left once it went through or gave up."""

    # The process's open turnstiles, by session: shared by the class on purpose.
    _open: ClassVar[dict[tuple[Any, ...], _Turnstile]] = {}

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0

    @classmethod
    def join(cls, session: tuple[Any, ...]) -> _Turnstile:
        turnstile = cls._open.get(session)
        if turnstile is None:
            turnstile = cls._open[session] = cls()
        turnstile.users += 1
        return turnstile

    def leave(self, session: tuple[Any, ...]) -> None:
        self.users -= 1
        if not self.users:
            self._open.pop(session, None)

    async def enter(self, deadline: float) -> bool:
        """False if the claims ahead still hold it at `deadline` (time.monotonic)."""
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                await self.lock.acquire()
        except TimeoutError:
            return False
        return True
