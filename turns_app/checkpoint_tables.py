"""Checkpoint storage, as turns use it: thread names, the savers' tables and
the SQL we run on them (install, schema check, purge, sweep, storage scans).
Only paused runs have checkpoints in the database (see
graphs.runtime.run_checkpoints); they go when the pause is answered,
rewound or deleted.

Our SQL touches LangGraph's tables directly so that a purge commits or rolls
back with the business write that calls it (a delete's tombstone, a commit's
retention) on Django's own connection. That couples us to the savers'
schema: `tests/turns_app/test_checkpoint_conformance.py` proves, on each
database, that our purge removes exactly the rows the saver's own
`adelete_thread` removes, and fails when a LangGraph upgrade adds a table.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
from typing import Any

from django.db import connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.recorder import MigrationRecorder

from core.database import is_postgres, postgres_conninfo
from sessions_app.selectors import pending_interrupt_threads
from turns_app.models import AgentTurn
from turns_app.types import checkpoint_thread_id

logger = logging.getLogger(__name__)

__all__ = ["checkpoint_thread_id"]

# --- the savers' schema -------------------------------------------------------------

# Every table each saver keeps a thread's rows in; each has a `thread_id` column.
POSTGRES_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
SQLITE_TABLES = ("checkpoints", "writes")
# PostgresSaver's own record of the schema migrations it applied.
POSTGRES_MIGRATIONS_TABLE = "checkpoint_migrations"

SQL_POSTGRES_SCHEMA_VERSION = "SELECT max(v) FROM checkpoint_migrations"
SQL_DELETE_THREADS = "DELETE FROM {table} WHERE thread_id IN ({placeholders})"
SQL_THREADS = "SELECT DISTINCT thread_id FROM checkpoints"
# Rows and bytes per table for threads whose name starts with a prefix.
SQL_STORAGE_POSTGRES = (
    "SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM {table} AS t WHERE thread_id LIKE %s ESCAPE '\\'"
)
SQL_STORAGE_SQLITE = {
    "checkpoints": (
        "SELECT count(*), coalesce(sum(length(thread_id) + coalesce(length(checkpoint), 0) "
        "+ coalesce(length(metadata), 0)), 0) FROM checkpoints WHERE thread_id LIKE %s ESCAPE '\\'"
    ),
    "writes": (
        "SELECT count(*), coalesce(sum(length(thread_id) + coalesce(length(value), 0)), 0) "
        "FROM writes WHERE thread_id LIKE %s ESCAPE '\\'"
    ),
}
SQLITE_TIMEOUT_SECONDS = 20.0


def checkpoint_tables(settings_dict: dict[str, Any] | None = None) -> tuple[str, ...]:
    return POSTGRES_TABLES if is_postgres(settings_dict) else SQLITE_TABLES


def postgres_schema_target() -> int:
    """The last migration the installed langgraph-checkpoint-postgres knows."""
    from langgraph.checkpoint.postgres import PostgresSaver

    return len(PostgresSaver.MIGRATIONS) - 1


# --- install (migrations only) ----------------------------------------------------------


def install_tables(settings_dict: dict[str, Any]) -> None:
    """Create or upgrade the checkpointer's tables through the savers' own
    `setup()`, which records what it applied, so a second run applies only
    what a newer LangGraph added. Called by migration 0002 and after every
    `manage.py migrate` (turns_app.apps).

    Each backend gets a connection of its own: PostgreSQL's setup runs
    `CREATE INDEX CONCURRENTLY` (needs autocommit) and SQLite's
    `executescript` would commit Django's open transaction.
    """
    if is_postgres(settings_dict):
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        with psycopg.connect(postgres_conninfo(settings_dict), autocommit=True, row_factory=dict_row) as pg:
            PostgresSaver(pg).setup()
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
        tables.append(POSTGRES_MIGRATIONS_TABLE)
    for table in tables:
        schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(table)}")


def schema_problem(using: str = "default", *, conn: BaseDatabaseWrapper | None = None) -> str | None:
    """Why the checkpointer cannot be used on this database, or None: its
    tables are missing, or (PostgreSQL) the installed LangGraph expects schema
    migrations that were never applied. Asked through `using`'s connection,
    or through `conn` (the health port's own)."""
    conn = conn if conn is not None else connections[using]
    existing = set(conn.introspection.table_names())
    missing = [t for t in checkpoint_tables(conn.settings_dict) if t not in existing]
    if missing:
        return f"the checkpointer's tables ({', '.join(missing)}) are missing: run `python manage.py migrate`"
    if is_postgres(conn.settings_dict):
        with conn.cursor() as cursor:
            cursor.execute(SQL_POSTGRES_SCHEMA_VERSION)
            (applied,) = cursor.fetchone()
        target = postgres_schema_target()
        if applied is None or applied < target:
            return (
                f"the checkpointer's schema is at migration {applied}, the installed "
                f"langgraph-checkpoint-postgres needs {target}: run `python manage.py migrate`"
            )
    return None


# --- purge, through Django's connection ------------------------------------------------------


def delete_threads(thread_ids: list[str], *, using: str = "default") -> int:
    """Delete every checkpoint row of these threads through Django's own
    connection, so the purge commits or rolls back with the business write
    that calls it. Same rows as the savers' `adelete_thread`; returns the
    number of checkpoints removed."""
    if not thread_ids:
        return 0
    conn = connections[using]
    removed = 0
    placeholders = ", ".join(["%s"] * len(thread_ids))
    with conn.cursor() as cursor:
        for table in checkpoint_tables(conn.settings_dict):
            cursor.execute(
                SQL_DELETE_THREADS.format(table=conn.ops.quote_name(table), placeholders=placeholders),
                thread_ids,
            )
            if table == "checkpoints":
                removed = cursor.rowcount
    return removed


def thread_storage(thread_prefix: str, *, using: str = "default") -> dict[str, int]:
    """Rows and bytes the checkpointer holds for threads starting with the
    prefix (admin display; a scan, so not for hot paths)."""
    conn = connections[using]
    rows = 0
    size = 0
    pattern = thread_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    postgres = is_postgres(conn.settings_dict)
    with conn.cursor() as cursor:
        for table in checkpoint_tables(conn.settings_dict):
            if postgres:
                sql = SQL_STORAGE_POSTGRES.format(table=conn.ops.quote_name(table))
            else:
                sql = SQL_STORAGE_SQLITE[table]
            cursor.execute(sql, [pattern])
            count, nbytes = cursor.fetchone()
            rows += int(count)
            size += int(nbytes)
    return {"rows": rows, "bytes": size}


# --- the sweep --------------------------------------------------------------------------------


def _parse_thread(thread_id: str) -> tuple[uuid.UUID, int, uuid.UUID] | None:
    try:
        session_id, epoch, turn_id = thread_id.split(":")
        return uuid.UUID(session_id), int(epoch), uuid.UUID(turn_id)
    except ValueError:
        return None


def checkpoints_sweep(*, dry_run: bool = False) -> list[str]:
    """Drop every checkpoint thread nothing will read again. A run persists
    checkpoints only when it pauses (graphs.runtime.run_checkpoints), so the
    threads kept are those of pending interrupts and of turns still running
    (one may be persisting right now); everything else of ours is a
    leftover: a pause answered, rewound or deleted, a run whose commit
    failed. Threads whose names are not ours are left alone. Scans the
    checkpointer's table: maintenance, not a request's job."""
    with connection.cursor() as cursor:
        cursor.execute(SQL_THREADS)
        threads = [row[0] for row in cursor.fetchall()]
    ours = [t for t in threads if _parse_thread(t) is not None]
    running = {
        checkpoint_thread_id(session_id, epoch, turn_id)
        for turn_id, session_id, epoch in AgentTurn.objects.filter(status=AgentTurn.Status.PENDING).values_list(
            "id", "session_id", "epoch"
        )
    }
    keep = running | set(pending_interrupt_threads())
    doomed = sorted(t for t in ours if t not in keep)
    if doomed and not dry_run:
        with transaction.atomic():
            delete_threads(doomed)
    return doomed


def upgrade_after_migrate(*, using: str = "default", plan=None, **_: object) -> None:
    """post_migrate receiver: bring the checkpointer's schema up to what the
    installed LangGraph expects (the savers' `setup()` applies only what is
    missing), once migration 0002 has created it. `plan` is None when
    `flush` sends the signal (tests, between cases): nothing to upgrade then."""
    if plan is None:
        return
    conn = connections[using]
    applied = MigrationRecorder(conn).migration_qs.filter(app="turns_app", name="0002_checkpointer_tables")
    if not applied.exists():
        return  # migrated backwards past 0002, or not there yet
    install_tables(conn.settings_dict)
