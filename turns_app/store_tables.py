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

Semantic search (AGENT_STORE_INDEX, a langgraph.json's `store.index`): on
SQLite the vector table (`store_vectors`, which has no dimensions there) is
installed always, so an index needs no new `migrate`; on PostgreSQL it needs
pgvector on the server and is installed by `migrate` once an index is set.
A server without pgvector is refused at start-up (`store_problem`).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.db.migrations.recorder import MigrationRecorder
from langgraph.store.base import PutOp

from core.database import is_postgres, postgres_conninfo
from graphs.runtime import effects
from graphs.runtime.embeddings import HashedEmbeddings, store_index
from graphs.runtime.sqlite_vectors import VectorConnection
from graphs.runtime.store import external
from graphs.runtime.turn_store import STORE_WRITE

logger = logging.getLogger(__name__)

SQLITE_TIMEOUT_SECONDS = 20.0
# The vectors first: they refer to the items.
TABLES = ("store_vectors", "vector_migrations", "store", "store_migrations")
PGVECTOR_MISSING = (
    "store.index (AGENT_STORE_INDEX, semantic search) needs the pgvector extension, which this PostgreSQL "
    "server does not have: install pgvector on the server, or remove store.index"
)
SQL_PGVECTOR = "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
# pgvector keeps a column's dimensions as its type modifier.
SQL_PG_DIMS = (
    "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('store_vectors') AND attname = 'embedding'"
)
# What installs SQLite's vector table without an index set: its table takes
# no dimensions, and nothing is embedded while installing.
SQLITE_TABLES_ONLY = {"dims": 1, "embed": HashedEmbeddings(1), "fields": ["$"]}
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
            index = store_index()
            if index is not None and not pg.execute(SQL_PGVECTOR).fetchone()["exists"]:  # type: ignore[index]
                logger.warning("the store's vector table is not installed: %s", PGVECTOR_MISSING)
                index = None  # the server refuses to start (store_problem); migrate does the rest
            PostgresStore(pg, index=index).setup()  # type: ignore[arg-type]
    else:
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(settings_dict["NAME"], timeout=SQLITE_TIMEOUT_SECONDS, factory=VectorConnection)
        try:
            SqliteStore(conn, index=SQLITE_TABLES_ONLY).setup()  # type: ignore[arg-type]
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


def store_problem(using: str = "default") -> str | None:
    """Why the store's index (AGENT_STORE_INDEX) cannot serve on this
    database, or None: checked at start-up, so it never fails later."""
    if settings.AGENT_STORE_INDEX is None:
        return None
    conn = connections[using]
    dims = settings.AGENT_STORE_INDEX["dims"]
    if is_postgres(conn.settings_dict):
        with conn.cursor() as cursor:
            cursor.execute(SQL_PGVECTOR)
            if not cursor.fetchone()[0]:
                return PGVECTOR_MISSING
            cursor.execute(SQL_PG_DIMS)
            row = cursor.fetchone()
        if row is None:
            return "store.index (AGENT_STORE_INDEX) needs the store's vector table: run `python manage.py migrate`"
        if row[0] != dims:
            return (
                f"the store's vectors have {row[0]} dimensions, store.index.dims is {dims}: "
                "an index's dims cannot change under its vectors"
            )
    elif "store_vectors" not in conn.introspection.table_names():
        return "store.index (AGENT_STORE_INDEX) needs the store's vector table: run `python manage.py migrate`"
    try:
        store_index()  # its embeddings load now, not at the first write
    except ImproperlyConfigured as exc:
        return str(exc)
    return None


def _put_queries(op: PutOp, vectors: list[list[Any]]) -> list[tuple[str, Any]]:
    """The store's statements for `op`; with an index, its vector rows
    from the vectors the turn made when it staged the write."""
    index = store_index()
    if is_postgres(connection.settings_dict):
        from langgraph.store.postgres.base import BasePostgresStore
        from langgraph.store.postgres.base import _ensure_index_config as postgres_index

        builder: Any = BasePostgresStore()
        builder.index_config = None if index is None else postgres_index(index)[1]  # type: ignore[arg-type]
        queries, request = builder._prepare_batch_PUT_queries([(0, op)])
        as_param = list
    else:
        from langgraph.store.sqlite.base import BaseSqliteStore
        from langgraph.store.sqlite.base import _ensure_index_config as sqlite_index
        from sqlite_vec import serialize_float32  # type: ignore[import-untyped]

        builder = BaseSqliteStore()
        builder.index_config = None if index is None else sqlite_index(index)[1]  # type: ignore[arg-type]
        queries, request = builder._prepare_batch_PUT_queries([(0, op)])
        as_param = serialize_float32
    queries = list(queries)
    if request is not None:
        by_name = dict(vectors)
        sql, rows = request
        queries.append((sql, [p for ns, key, name, _ in rows for p in (ns, key, name, as_param(by_name[name]))]))
    return queries


def apply_write(payload: dict[str, Any], turn: effects.TurnContext) -> dict[str, Any]:
    """The effect `store.write`, in the commit's transaction: the stores'
    own statements, on the connection Django's transaction holds (its raw
    connection, so each store's own placeholders and adapters apply)."""
    namespace = tuple(payload["namespace"])
    op = PutOp(namespace, payload["key"], payload["value"], index=payload["index"], ttl=payload["ttl"])
    connection.ensure_connection()
    raw = connection.connection
    for sql, params in _put_queries(op, payload.get("vectors") or []):
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
