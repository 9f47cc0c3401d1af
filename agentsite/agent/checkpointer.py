"""The LangGraph checkpointer's lifecycle, following Django's default database.

PostgreSQL → `AsyncPostgresSaver` over one psycopg pool per event loop;
SQLite → `AsyncSqliteSaver` on the same file. Savers are opened lazily, one
set per event loop (they cannot cross loops), and closed by `close_savers()`
at shutdown. Tables are installed by `manage.py migrate` only
(turns_app/migrations/0002), never at request time.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import weakref
import zlib
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from langgraph.checkpoint.base import BaseCheckpointSaver

logger = logging.getLogger(__name__)

# The tables each saver keeps; every one of them has a `thread_id` column.
POSTGRES_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
SQLITE_TABLES = ("checkpoints", "writes")
SQLITE_TIMEOUT_SECONDS = 20.0


def database_settings() -> dict[str, Any]:
    # The live settings_dict, not DATABASE_URL: under test it names the test database.
    return connections["default"].settings_dict


def is_postgres(settings_dict: dict[str, Any] | None = None) -> bool:
    return "postgresql" in (settings_dict or database_settings())["ENGINE"]


def checkpoint_tables(settings_dict: dict[str, Any] | None = None) -> tuple[str, ...]:
    return POSTGRES_TABLES if is_postgres(settings_dict) else SQLITE_TABLES


def postgres_conninfo(settings_dict: dict[str, Any]) -> str:
    # Built by hand: Django's get_connection_params() carries its sync cursor
    # factory, which breaks the async saver (FIELD-NOTES).
    from psycopg.conninfo import make_conninfo

    params = {
        "dbname": settings_dict.get("NAME") or "postgres",
        "user": settings_dict.get("USER") or None,
        "password": settings_dict.get("PASSWORD") or None,
        "host": settings_dict.get("HOST") or None,
        "port": str(settings_dict["PORT"]) if settings_dict.get("PORT") else None,
    }
    for key in ("sslmode", "sslrootcert", "sslcert", "sslkey", "application_name"):
        if settings_dict.get("OPTIONS", {}).get(key):
            params[key] = settings_dict["OPTIONS"][key]
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


# --- installation (migrations only) -------------------------------------------


def install_tables(settings_dict: dict[str, Any]) -> None:
    """Create the checkpointer's tables through the savers' own `setup()`.

    Each backend gets a connection of its own: PostgreSQL's setup runs
    `CREATE INDEX CONCURRENTLY` (needs autocommit) and SQLite's
    `executescript` would commit Django's open transaction.
    """
    if is_postgres(settings_dict):
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        with psycopg.connect(
            postgres_conninfo(settings_dict), autocommit=True, row_factory=dict_row
        ) as conn:
            PostgresSaver(conn).setup()
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(settings_dict["NAME"], timeout=SQLITE_TIMEOUT_SECONDS)
        try:
            SqliteSaver(conn).setup()
        finally:
            conn.close()


def drop_tables(settings_dict: dict[str, Any], schema_editor) -> None:
    tables = list(checkpoint_tables(settings_dict))
    if is_postgres(settings_dict):
        tables.append("checkpoint_migrations")
    for table in tables:
        schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(table)}")


# --- runtime savers -------------------------------------------------------------


@dataclass
class _LoopSavers:
    savers: list[BaseCheckpointSaver]
    closers: list[Any] = field(default_factory=list)


_by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopSavers]" = (
    weakref.WeakKeyDictionary()
)
_opening: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = (
    weakref.WeakKeyDictionary()
)


class CheckpointerUnavailable(RuntimeError):
    pass


async def get_saver(shard_key: str = "") -> BaseCheckpointSaver:
    """The saver for this event loop. `AsyncPostgresSaver` serialises every
    call behind one lock, so PostgreSQL gets `AGENT_DB_POOL_SIZE` savers over
    a shared pool; a session always maps to the same one."""
    loop = asyncio.get_running_loop()
    entry = _by_loop.get(loop)
    if entry is None:
        lock = _opening.setdefault(loop, asyncio.Lock())
        async with lock:
            entry = _by_loop.get(loop)
            if entry is None:
                entry = await _open(database_settings())
                _by_loop[loop] = entry
    if len(entry.savers) == 1:
        return entry.savers[0]
    return entry.savers[zlib.crc32(shard_key.encode()) % len(entry.savers)]


async def _open(settings_dict: dict[str, Any]) -> _LoopSavers:
    try:
        if is_postgres(settings_dict):
            return await _open_postgres(settings_dict)
        return await _open_sqlite(settings_dict)
    except CheckpointerUnavailable:
        raise
    except Exception as exc:
        raise CheckpointerUnavailable(f"cannot open the checkpointer: {exc}") from exc


async def _open_postgres(settings_dict: dict[str, Any]) -> _LoopSavers:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    size = settings.AGENT_DB_POOL_SIZE
    pool = AsyncConnectionPool(
        postgres_conninfo(settings_dict),
        min_size=1,
        max_size=size,
        kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": None},
        open=False,
        # A dead server must fail a turn quickly (503), not hang it.
        timeout=10,
        check=AsyncConnectionPool.check_connection,
    )
    await pool.open(wait=True, timeout=10)
    return _LoopSavers(savers=[AsyncPostgresSaver(pool) for _ in range(size)], closers=[pool.close])


async def _open_sqlite(settings_dict: dict[str, Any]) -> _LoopSavers:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await aiosqlite.connect(settings_dict["NAME"], timeout=SQLITE_TIMEOUT_SECONDS)
    try:
        await conn.execute("PRAGMA busy_timeout=20000")
        cursor = await conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('checkpoints','writes')"
        )
        (found,) = await cursor.fetchone()
        if found != 2:
            raise CheckpointerUnavailable(
                "the checkpointer's tables are missing: run `python manage.py migrate`"
            )
    except BaseException:
        await conn.close()
        raise
    saver = AsyncSqliteSaver(conn)
    # The tables exist (checked above); this stops the saver from running its
    # DDL script lazily on the first request.
    saver.is_setup = True
    return _LoopSavers(savers=[saver], closers=[conn.close])


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


# --- thread removal through Django's connection -----------------------------------


def delete_threads(thread_ids: list[str], *, using: str = "default") -> int:
    """Delete every checkpoint row of these threads through Django's own
    connection, so the purge commits or rolls back with the business write
    that calls it (session delete, retention after a commit). Same rows as the
    savers' `adelete_thread`; returns the number of checkpoints removed."""
    if not thread_ids:
        return 0
    connection = connections[using]
    removed = 0
    with connection.cursor() as cursor:
        for table in checkpoint_tables(connection.settings_dict):
            placeholders = ", ".join(["%s"] * len(thread_ids))
            cursor.execute(
                f"DELETE FROM {connection.ops.quote_name(table)} WHERE thread_id IN ({placeholders})",
                thread_ids,
            )
            if table == "checkpoints":
                removed = cursor.rowcount
    return removed


def thread_storage(thread_prefix: str, *, using: str = "default") -> dict[str, int]:
    """Rows and bytes the checkpointer holds for threads starting with the
    prefix (admin display; a scan, so not for hot paths)."""
    connection = connections[using]
    rows = 0
    size = 0
    pattern = thread_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    with connection.cursor() as cursor:
        for table in checkpoint_tables(connection.settings_dict):
            if is_postgres(connection.settings_dict):
                expr = f"pg_column_size({connection.ops.quote_name(table)}.*)"
            else:
                expr = "length(thread_id) + " + (
                    "coalesce(length(checkpoint), 0) + coalesce(length(metadata), 0)"
                    if table == "checkpoints"
                    else "coalesce(length(value), 0)"
                )
            cursor.execute(
                f"SELECT count(*), coalesce(sum({expr}), 0) FROM {connection.ops.quote_name(table)} "
                "WHERE thread_id LIKE %s ESCAPE '\\'",
                [pattern],
            )
            count, nbytes = cursor.fetchone()
            rows += int(count)
            size += int(nbytes)
    return {"rows": rows, "bytes": size}


def ensure_tables_exist() -> None:
    """Raise ImproperlyConfigured unless migrate installed the checkpointer."""
    connection = connections["default"]
    existing = set(connection.introspection.table_names())
    missing = [t for t in checkpoint_tables(connection.settings_dict) if t not in existing]
    if missing:
        raise ImproperlyConfigured(
            f"the checkpointer's tables ({', '.join(missing)}) are missing: "
            "run `python manage.py migrate`"
        )
