"""LangGraph's store tables, as agentsite uses them: installed by `migrate`
(migration 0010, upgraded after every `migrate`), written by a committing
turn through Django's connection, swept of expired items by maintenance.

A graph's store write is an effect (graphs.runtime.turn_store): the turn's
commit applies it here, inside its own transaction, so it lands with the
turn or not at all. The SQL is the stores' own — each store's
`_prepare_batch_PUT_queries` builds it — run on the raw connection Django's
transaction holds; `tests/turns_app/test_store_tables.py` proves that what
lands this way reads back through the store as the store's own `aput` writes
it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from django.db import connection, connections
from django.db.migrations.recorder import MigrationRecorder
from langgraph.store.base import PutOp

from core.database import is_postgres, postgres_conninfo
from graphs.runtime import effects
from graphs.runtime.store import external
from graphs.runtime.turn_store import STORE_WRITE

SQLITE_TIMEOUT_SECONDS = 20.0
TABLES = ("store", "store_migrations")
SQL_SWEEP = {
    "postgres": "DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at < NOW()",
    "sqlite": "DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at < CURRENT_TIMESTAMP",
}


def install_tables(settings_dict: dict[str, Any]) -> None:
    """Create or upgrade the store's tables through the stores' own
    `setup()`, which records what it applied (`store_migrations`), on a
    connection of its own, as turns_app.checkpoint_tables does."""
    if is_postgres(settings_dict):
        import psycopg
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row

        with psycopg.connect(postgres_conninfo(settings_dict), autocommit=True, row_factory=dict_row) as pg:
            PostgresStore(pg).setup()
    else:
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(settings_dict["NAME"], timeout=SQLITE_TIMEOUT_SECONDS)
        try:
            SqliteStore(conn).setup()
            conn.commit()  # setup's last INSERT of store_migrations is left open
        finally:
            conn.close()


def drop_tables(schema_editor) -> None:
    for table in TABLES:
        schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(table)}")


def upgrade_after_migrate(*, using: str = "default", plan=None, **_: object) -> None:
    """post_migrate receiver: the store's schema migrations a newer LangGraph
    brings, once migration 0010 has installed it (`plan` is None on a
    `flush`: nothing to do)."""
    if plan is None:
        return
    conn = connections[using]
    if MigrationRecorder(conn).migration_qs.filter(app="turns_app", name="0010_store_tables").exists():
        install_tables(conn.settings_dict)


def _put_queries(op: PutOp) -> list[tuple[str, Any]]:
    if is_postgres(connection.settings_dict):
        from langgraph.store.postgres.base import BasePostgresStore

        builder: Any = BasePostgresStore()
        builder.index_config = None  # no embeddings: semantic search is not offered yet
        queries, _ = builder._prepare_batch_PUT_queries([(0, op)])
    else:
        from langgraph.store.sqlite.base import BaseSqliteStore

        builder = BaseSqliteStore()
        builder.index_config = None
        queries, _ = builder._prepare_batch_PUT_queries([(0, op)])
    return list(queries)


def apply_write(payload: dict[str, Any], turn: effects.TurnContext) -> dict[str, Any]:
    """The effect `store.write`, in the commit's transaction: the stores'
    own statements, on the connection Django's transaction holds (its raw
    connection, so each store's own placeholders and adapters apply)."""
    namespace = tuple(payload["namespace"])
    op = PutOp(namespace, payload["key"], payload["value"], index=payload["index"], ttl=payload["ttl"])
    connection.ensure_connection()
    raw = connection.connection
    for sql, params in _put_queries(op):
        raw.execute(sql, params)
    return {
        "namespace": list(external(namespace)),
        "key": payload["key"],
        "deleted": payload["value"] is None,
    }


def register() -> None:
    effects.register(STORE_WRITE, apply_write)


def sweep_expired() -> int:
    """Delete the items whose TTL ran out (maintenance): the stores read an
    expired item until it is swept, as LangGraph's own sweeper leaves them."""
    dialect = "postgres" if is_postgres(connection.settings_dict) else "sqlite"
    with connection.cursor() as cursor:
        cursor.execute(SQL_SWEEP[dialect])
        return max(cursor.rowcount, 0)
