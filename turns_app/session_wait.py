"""Waiting for a busy session: a claim refused because another turn holds
the session is made again when that turn ends, not on a polling timer.

The refusal names the holder. If it runs in this process, its end is the
end of its task. If it runs elsewhere, its final event (`done` or `error`,
written in the commit or abort transaction) rings the event log's wake-up
(PostgreSQL NOTIFY; in-process on SQLite); the waiter subscribes *before*
claiming again, so an end between the refusal and the subscription is seen
by that claim. A short cap on every wait is the safety net for a lost
wake-up (a LISTEN connection that dropped) or a holder whose lease ran out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

from django.conf import settings

from agentsite import metrics
from agentsite.asyncdb import db
from agentsite.errors import SessionBusy
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
    try:
        return await db(claim, **kwargs)
    except SessionBusy as refused:
        busy = refused
    started = time.monotonic()
    deadline = started + settings.AGENT_SESSION_WAIT_SECONDS
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
