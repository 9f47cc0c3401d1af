"""Waking the clients that follow a turn from the event log when new events
of it are written, on whichever process wrote them.

PostgreSQL: a trigger on agent_turn_events notifies the turn id (never
event text) of an insert (migration 0006), delivered when the writing
transaction commits, if the turn has a follower registered in
agent_turn_followers (migration 0008: a NOTIFY serializes commits, so only
turns someone waits on notify); each serving process LISTENs on one
connection of its own and wakes its local followers. SQLite is one process
by design: the write wakes followers in-process once it commits.
A follower also re-reads the log on a timer, so a lost wake-up (a LISTEN
connection that dropped) costs latency, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import timedelta
from uuid import UUID

from django.db import connection, transaction
from django.utils import timezone

from core.asyncdb import db
from core.database import database_settings, is_postgres, postgres_conninfo
from turns_app.models import TurnFollower

logger = logging.getLogger(__name__)

CHANNEL = "agentsite_turn_events"
# A cancelled turn's id: the process running it stops its graph.
CANCEL_CHANNEL = "agentsite_turn_cancels"
RECONNECT_SECONDS = 1.0
READY_SECONDS = 2.0
# Far longer than any follower waits (a turn's run, a queued claim): older
# rows were left by a process that died.
FOLLOWER_STALE_AFTER = timedelta(hours=1)


def wake_followers(turn_id: UUID) -> None:
    """Call inside the transaction that wrote events of `turn_id`: followers
    are woken when (and only if) it commits. On PostgreSQL the insert's
    trigger already did it."""
    if not is_postgres(connection.settings_dict):
        _notify(CHANNEL, str(turn_id))


def wake_runner(turn_id: UUID) -> None:
    """Call inside the transaction that cancelled `turn_id`: the process
    running it stops it once that commits."""
    _notify(CANCEL_CHANNEL, str(turn_id))


def _notify(channel: str, payload: str) -> None:
    if is_postgres(connection.settings_dict):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload])
    else:
        transaction.on_commit(lambda: _hub.publish(_key(channel, payload)))


def _key(channel: str, payload: str) -> str:
    return payload if channel == CHANNEL else f"{channel}:{payload}"


class Wakeup:
    """One follower's doorbell."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()

    def ring(self) -> None:
        self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self, timeout: float) -> bool:
        """True if rung (and re-armed), False after `timeout`."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return False
        self._event.clear()
        return True


class _Call:
    """A doorbell that runs a callback on its event loop instead."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback) -> None:
        self._loop = loop
        self._callback = callback

    def ring(self) -> None:
        self._loop.call_soon_threadsafe(self._callback)


class _Hub:
    """Followers by turn id, across threads and event loops of this process;
    on PostgreSQL, one LISTEN connection per event loop feeds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._followers: dict[str, set[Wakeup]] = defaultdict(set)
        self._listeners: dict[asyncio.AbstractEventLoop, asyncio.Task] = {}
        self._ready: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}

    def publish(self, turn_id: str) -> None:
        with self._lock:
            followers = list(self._followers.get(turn_id, ()))
        for wakeup in followers:
            wakeup.ring()

    def add(self, turn_id: str, wakeup: Wakeup) -> None:
        with self._lock:
            self._followers[turn_id].add(wakeup)

    def remove(self, turn_id: str, wakeup: Wakeup) -> None:
        with self._lock:
            followers = self._followers.get(turn_id)
            if followers is not None:
                followers.discard(wakeup)
                if not followers:
                    del self._followers[turn_id]

    async def ensure_listening(self) -> None:
        """Start this loop's LISTEN connection if it is not running, and give
        it a moment to be listening (a follower reading the log right after
        would otherwise miss what is written in between — until its timer)."""
        loop = asyncio.get_running_loop()
        task = self._listeners.get(loop)
        if task is not None and not task.done() and self._ready[loop].is_set():
            return  # every turn asks: the common answer costs no wait_for (docs/scale.md)
        if not is_postgres(database_settings()):
            return
        if task is None or task.done():
            ready = self._ready[loop] = asyncio.Event()
            self._listeners[loop] = loop.create_task(self._listen(ready), name="turn-event-listener")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready[loop].wait(), READY_SECONDS)

    async def _listen(self, ready: asyncio.Event) -> None:
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    postgres_conninfo(database_settings()), autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    await conn.execute(f"LISTEN {CANCEL_CHANNEL}")
                    await self._deliver(conn.pgconn, ready)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("turn event listener: %r; reconnecting", exc)
            ready.clear()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _deliver(self, pgconn, ready: asyncio.Event) -> None:
        """Publishes notifications as they arrive, read off the connection's
        socket by one reader registered for the connection's life; returns
        (raises) when the connection is lost. psycopg's `notifies()` adds and
        removes its reader for every wait: with every turn of every process
        notifying, that cost each serving process more than the turns it
        runs (docs/scale.md)."""
        loop = asyncio.get_running_loop()
        lost = loop.create_future()

        def readable() -> None:
            try:
                pgconn.consume_input()
                while (notice := pgconn.notifies()) is not None:
                    self.publish(_key(notice.relname.decode(), notice.extra.decode()))
            except Exception as exc:  # the connection is gone
                if not lost.done():
                    lost.set_exception(exc)

        fd = pgconn.socket
        loop.add_reader(fd, readable)
        ready.set()
        try:
            await lost
        finally:
            loop.remove_reader(fd)

    async def stop(self) -> None:
        """Stop this loop's listener (shutdown, test teardown)."""
        loop = asyncio.get_running_loop()
        self._ready.pop(loop, None)
        task = self._listeners.pop(loop, None)
        if task is not None:
            task.cancel()
            await asyncio.wait({task})


_hub = _Hub()
stop_listening = _hub.stop


@contextlib.asynccontextmanager
async def _rung_on(channel: str, turn_id: UUID, doorbell) -> AsyncIterator[None]:
    await _hub.ensure_listening()
    key = _key(channel, str(turn_id))
    _hub.add(key, doorbell)
    try:
        yield
    finally:
        _hub.remove(key, doorbell)


@contextlib.asynccontextmanager
async def subscription(turn_id: UUID, *, channel: str = CHANNEL) -> AsyncIterator[Wakeup]:
    """Rung whenever events of `turn_id` are written (or, on CANCEL_CHANNEL,
    when it is cancelled). Subscribe *before* reading the log, so nothing
    written in between goes unnoticed."""
    wakeup = Wakeup(asyncio.get_running_loop())
    async with _rung_on(channel, turn_id, wakeup), _followed(turn_id, channel):
        yield wakeup


@contextlib.asynccontextmanager
async def _followed(turn_id: UUID, channel: str) -> AsyncIterator[None]:
    """PostgreSQL: the turn's writes notify while this lasts. If the
    registration fails, the follower still sees every event, by its timer."""
    if channel != CHANNEL or not is_postgres(database_settings()):
        yield
        return
    try:
        follower = await db(follow, turn_id=turn_id)
    except Exception as exc:
        logger.warning("turn %s: could not register a follower, woken by its timer only: %r", turn_id, exc)
        follower = None
    try:
        yield
    finally:
        if follower is not None:
            try:
                await db(unfollow, follower=follower)
            except Exception as exc:
                logger.warning("turn %s: could not unregister a follower (maintenance will): %r", turn_id, exc)


def follow(*, turn_id: UUID) -> UUID:
    """Registers a follower of the turn. FOR SHARE closes the gap between a
    writer's trigger (which saw no follower) and its commit: every write of
    a turn's final event updates the turn's row first, in the same
    transaction, so this waits for such a writer to commit (the follower's
    read after it then sees the event), or else that writer's event insert
    starts after this committed and sees the follower."""
    follower = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            'INSERT INTO "agent_turn_followers" ("id", "turn_id", "created_at") '
            'SELECT %s, "id", NOW() FROM "agent_turns" WHERE "id" = %s FOR SHARE',
            [follower, turn_id],
        )
    return follower


def unfollow(*, follower: UUID) -> None:
    with connection.cursor() as cursor:
        cursor.execute('DELETE FROM "agent_turn_followers" WHERE "id" = %s', [follower])


def followers_remove_stale() -> int:
    """Followers left by processes that died (maintenance)."""
    deleted, _ = TurnFollower.objects.filter(created_at__lt=timezone.now() - FOLLOWER_STALE_AFTER).delete()
    return deleted


def on_cancel(turn_id: UUID, callback) -> contextlib.AbstractAsyncContextManager[None]:
    """Runs `callback` on this event loop when `turn_id` is cancelled (from
    any process). A registration, not a waiting task: every running turn
    has one (docs/scale.md)."""
    return _rung_on(CANCEL_CHANNEL, turn_id, _Call(asyncio.get_running_loop(), callback))
