"""The LangGraph checkpointer's runtime lifecycle, following Django's default
database.

PostgreSQL → `AsyncPostgresSaver` over one psycopg pool per event loop;
SQLite → `AsyncSqliteSaver` on the same file. Savers are opened lazily, one
set per event loop (they cannot cross loops), and closed by `close_savers()`
at shutdown. Their tables are installed by `manage.py migrate` and checked at
start-up (turns_app.checkpoint_tables), never touched at request time.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from langgraph.checkpoint.base import BaseCheckpointSaver

from core.database import CheckpointerUnavailable, database_settings, is_postgres, postgres_conninfo
from graphs.runtime.per_loop import PerLoop

logger = logging.getLogger(__name__)

SQLITE_TIMEOUT_SECONDS = 20.0
OPEN_TIMEOUT_SECONDS = 10.0


@dataclass
class _LoopSavers:
    savers: list[BaseCheckpointSaver]
    closers: list[Any] = field(default_factory=list)
    pool: Any = None  # PostgreSQL's connection pool, for its usage metrics


_loops: PerLoop[_LoopSavers] = PerLoop()
_by_loop = _loops.by_loop


async def get_saver(shard_key: str = "") -> BaseCheckpointSaver:
    """The saver for this event loop. `AsyncPostgresSaver` serialises every
    call behind one lock, so PostgreSQL gets `AGENT_DB_POOL_SIZE` savers over
    a shared pool; a session always maps to the same one."""
    entry = await _loops.get(lambda: _open(database_settings()))
    if len(entry.savers) == 1:
        return entry.savers[0]
    return entry.savers[zlib.crc32(shard_key.encode()) % len(entry.savers)]


async def _open(settings_dict: dict[str, Any]) -> _LoopSavers:
    try:
        if is_postgres(settings_dict):
            return await _open_postgres(settings_dict)
        return await _open_sqlite(settings_dict)
    except Exception as exc:
        raise CheckpointerUnavailable(f"cannot open the checkpointer: {exc}") from exc


async def _open_postgres(settings_dict: dict[str, Any]) -> _LoopSavers:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import AsyncConnectionPool

    size = settings.AGENT_DB_POOL_SIZE
    pool = AsyncConnectionPool(
        postgres_conninfo(settings_dict),
        min_size=1,
        max_size=size,
        # The class says what row_factory gives: the saver wants dict rows.
        connection_class=AsyncConnection[DictRow],
        kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": None},
        open=False,
        # A dead server must fail a turn quickly (503), not hang it.
        timeout=OPEN_TIMEOUT_SECONDS,
        check=AsyncConnectionPool.check_connection,
    )
    try:
        await pool.open(wait=True, timeout=OPEN_TIMEOUT_SECONDS)
    except BaseException:
        # Whatever stopped the opening (an outage, a caller's timeout or
        # cancel), the pool must not outlive it. timeout=0: do not wait for
        # workers stuck in a connection attempt; each gives up within
        # connect_timeout and then stops.
        await asyncio.shield(pool.close(timeout=0))
        raise
    return _LoopSavers(savers=[AsyncPostgresSaver(pool) for _ in range(size)], closers=[pool.close], pool=pool)


async def _open_sqlite(settings_dict: dict[str, Any]) -> _LoopSavers:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await aiosqlite.connect(settings_dict["NAME"], timeout=SQLITE_TIMEOUT_SECONDS)
    try:
        await conn.execute("PRAGMA busy_timeout=20000")
    except BaseException:
        await asyncio.shield(conn.close())
        raise
    saver = AsyncSqliteSaver(conn)
    # Start-up checked the tables (turns_app.checkpoint_tables.schema_problem); this
    # stops the saver from running its DDL script on the first request.
    saver.is_setup = True
    return _LoopSavers(savers=[saver], closers=[conn.close])


def pool_stats() -> list[dict[str, int]]:
    """psycopg_pool's counters of every open checkpointer pool (PostgreSQL;
    one per event loop), for the metrics."""
    return [entry.pool.get_stats() for entry in list(_by_loop.values()) if entry.pool is not None]


async def close_savers() -> None:
    """Close this loop's savers (the shutdown hook, and test teardown)."""
    loop = asyncio.get_running_loop()
    entry = _by_loop.pop(loop, None)
    if entry is None:
        return
    for close in entry.closers:
        try:
            await close()
        except Exception:  # a broken pool must not stop the others closing
            logger.exception("closing a checkpointer connection failed")


async def shared_pool() -> Any:
    """This loop's PostgreSQL pool, opening the savers if need be: the
    store's queries share its connections (graphs.runtime.store)."""
    await get_saver()
    return _by_loop[asyncio.get_running_loop()].pool
