"""Periodic maintenance, inside the serving process (no cron): abort turns
whose lease ran out, compact finished turns' event logs, drop checkpoint
threads no session reads, expire idle sessions (AGENT_SESSION_IDLE_DAYS)
and threads whose TTL ran out (both through `session_delete`), remove old tombstones (AGENT_TOMBSTONE_DAYS) and
the turn followers that processes which died left registered.
`manage.py sweep_checkpoints` runs the same work by hand.

On PostgreSQL several processes share the database: one of them leads. It
holds a session-level advisory lock on a connection of its own for as long
as it lives, and only the holder runs the work; when it dies its connection
goes, the lock with it, and another process takes over at its next tick.
SQLite mode is one process already (agentsite.startup's file lock).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, dataclass, field

import psycopg
from django.conf import settings

from core import metrics
from core.asyncdb import db
from core.database import database_settings, is_postgres, postgres_conninfo
from sessions_app.services import sessions_expire_idle, sessions_expire_ttl, tombstones_remove
from turns_app.checkpoint_tables import checkpoints_sweep
from turns_app.services import events_compact, sessions_prune_ttl, turns_expire_dead
from turns_app.store_tables import sweep_expired
from turns_app.wakeups import followers_remove_stale

logger = logging.getLogger(__name__)

# pg advisory lock key: "agentsite maintenance" (any constant no one else uses).
ADVISORY_LOCK_KEY = 0x61676D6E74  # "agmnt"
SQL_TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"
SQL_ALIVE = "SELECT 1"
# Sessions expired or tombstones removed per run: a first run on a big,
# old database spreads over several ticks instead of one long one.
BATCH = 500


@dataclass
class Report:
    turns_expired: int = 0
    events_compacted: int = 0
    threads_dropped: list[str] = field(default_factory=list)
    sessions_expired: int = 0
    threads_ttl_expired: int = 0
    threads_ttl_pruned: int = 0
    tombstones_removed: int = 0
    followers_removed: int = 0
    store_items_expired: int = 0

    def counts(self) -> dict[str, int]:
        return {k: (len(v) if isinstance(v, list) else v) for k, v in asdict(self).items()}


def maintenance_run(*, dry_run: bool = False) -> Report:
    """One pass of the work (sync: call it from a worker thread). A dry run
    only lists the checkpoint threads it would drop."""
    report = Report()
    if dry_run:
        report.threads_dropped = checkpoints_sweep(dry_run=True)
        return report
    report.turns_expired = turns_expire_dead()
    report.events_compacted = events_compact()
    report.threads_dropped = checkpoints_sweep()
    if settings.AGENT_SESSION_IDLE_DAYS > 0:
        report.sessions_expired = sessions_expire_idle(days=settings.AGENT_SESSION_IDLE_DAYS, limit=BATCH)
    if _thread_sweep_due():
        limit = settings.AGENT_THREAD_TTL["sweep_limit"]
        report.threads_ttl_expired = sessions_expire_ttl(limit=limit)
        report.threads_ttl_pruned = sessions_prune_ttl(limit=limit)
    if settings.AGENT_TOMBSTONE_DAYS > 0:
        report.tombstones_removed = tombstones_remove(days=settings.AGENT_TOMBSTONE_DAYS, limit=BATCH)
    report.followers_removed = followers_remove_stale()
    if _store_sweep_due():
        report.store_items_expired = sweep_expired()
    return report


_last_sweeps: dict[str, float] = {}


def _sweep_due(kind: str, minutes: float, now: float | None) -> bool:
    now = time.monotonic() if now is None else now
    last = _last_sweeps.get(kind)
    if last is not None and now - last < minutes * 60:
        return False
    _last_sweeps[kind] = now
    return True


def _store_sweep_due(now: float | None = None) -> bool:
    """Expired store items are swept on a pass at most every
    AGENT_STORE_SWEEP_INTERVAL_MINUTES (store.ttl.sweep_interval_minutes)."""
    return _sweep_due("store", settings.AGENT_STORE_SWEEP_INTERVAL_MINUTES, now)


def _thread_sweep_due(now: float | None = None) -> bool:
    """Threads expire by TTL on a pass at most every AGENT_THREAD_TTL
    sweep_interval_minutes (checkpointer.ttl's)."""
    return _sweep_due("threads", settings.AGENT_THREAD_TTL["sweep_interval_minutes"], now)


class Leadership:
    """The advisory lock that makes this process the one that maintains
    (PostgreSQL). Held on a connection of its own, autocommit, for as long
    as it answers."""

    def __init__(self) -> None:
        self.conn: psycopg.AsyncConnection | None = None

    async def held(self) -> bool:
        if self.conn is not None:
            try:
                await self.conn.execute(SQL_ALIVE)
                return True
            except psycopg.Error:
                logger.warning("maintenance: the lock's connection broke; trying to lead again")
                await self.release()
        try:
            conn = await psycopg.AsyncConnection.connect(postgres_conninfo(database_settings()), autocommit=True)
        except psycopg.Error as exc:
            logger.warning("maintenance: cannot reach the database to lead: %s", exc)
            return False
        try:
            row = await (await conn.execute(SQL_TRY_LOCK, [ADVISORY_LOCK_KEY])).fetchone()
        except psycopg.Error:
            await conn.close()
            raise
        if row is None or not row[0]:
            await conn.close()  # another process leads
            return False
        self.conn = conn
        logger.info("maintenance: this process leads (advisory lock %d)", ADVISORY_LOCK_KEY)
        return True

    async def release(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            await conn.close()  # the lock goes with the session


async def tick(leadership: Leadership | None) -> Report | None:
    """One scheduled pass: the work if this process leads, else nothing."""
    if leadership is not None and not await leadership.held():
        return None
    try:
        report = await db(maintenance_run)
    except Exception:
        metrics.MAINTENANCE_RUNS.labels(result="error").inc()
        logger.exception("maintenance failed; trying again at the next tick")
        return None
    metrics.MAINTENANCE_RUNS.labels(result="ok").inc()
    counts = report.counts()
    for kind, count in counts.items():
        metrics.MAINTENANCE_ITEMS.labels(kind=kind).inc(count)
    logger.log(
        logging.INFO if any(counts.values()) else logging.DEBUG,
        "maintenance: %s",
        ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()),
        extra={"event": "maintenance", **counts},
    )
    return report


class Maintenance:
    """The periodic task of a serving process."""

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.leadership: Leadership | None = None

    def start(self) -> None:
        interval = settings.AGENT_MAINTENANCE_INTERVAL_SECONDS
        if interval <= 0 or self.task is not None:
            return  # off: `manage.py sweep_checkpoints` by hand
        self.leadership = Leadership() if is_postgres() else None
        self.task = asyncio.ensure_future(self._loop(interval))

    async def _loop(self, interval: float) -> None:
        # The first pass one interval after start: a restarting fleet does
        # not all sweep at once, and start-up stays quick.
        while True:
            await asyncio.sleep(interval)
            await tick(self.leadership)

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
        if self.leadership is not None:
            await self.leadership.release()


maintenance = Maintenance()
