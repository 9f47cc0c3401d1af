"""LangGraph's store, following Django's default database, as the
checkpointer does (graphs.runtime.savers).

PostgreSQL → `AsyncPostgresStore` over the savers' psycopg pool of this
event loop; SQLite → `AsyncSqliteStore` on the same file, on a connection of
its own. One store per event loop (it cannot cross loops), opened lazily and
closed by `close_stores()` at shutdown. Its tables are installed by
`manage.py migrate` (turns_app.store_tables), never at request time. With
AGENT_STORE_INDEX (store.index) both stores rank a search's `query` by its
embeddings (graphs.runtime.embeddings).

Every namespace is an owner's: the store holds `(owner_label(owner), *ns)`
and its callers see `ns` (`internal` / `external`), so no client names,
reads or lists another owner's items (docs/agent-protocol.md, "Store").
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from langgraph.store.base import BaseStore, Item, TTLConfig

from core.database import CheckpointerUnavailable, database_settings, is_postgres
from graphs.runtime.embeddings import store_index
from graphs.runtime.per_loop import PerLoop
from graphs.runtime.savers import SQLITE_TIMEOUT_SECONDS, shared_pool
from graphs.runtime.sqlite_vectors import VectorConnection

logger = logging.getLogger(__name__)

OWNER_LABEL_PREFIX = "owner:"
# LangGraph's stores refuse a root label of "langgraph"; ours is the owner's,
# so the refusal is made on the client's own root.
RESERVED_ROOT = "langgraph"


def owner_label(owner: str) -> str:
    """The namespace label of an owner: labels cannot hold a period (the
    stores join labels with one), so `%` and `.` are escaped, which keeps
    the mapping one to one."""
    return OWNER_LABEL_PREFIX + owner.replace("%", "%25").replace(".", "%2E")


def internal(owner: str, namespace: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return (owner_label(owner), *namespace)


def external(namespace: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(namespace[1:])


def shown(item: Item) -> Item:
    """An item as its owner sees it: without the owner's label."""
    item.namespace = external(item.namespace)
    return item


def ttl_config() -> TTLConfig:
    """LangGraph's TTL settings (store.ttl): reads refresh an item's TTL
    unless the caller says not to (as on LangGraph's server) or
    AGENT_STORE_REFRESH_ON_READ is off; `default_ttl` applies to writes that
    name none."""
    config: TTLConfig = {"refresh_on_read": settings.AGENT_STORE_REFRESH_ON_READ, "omit_expired": True}
    if settings.AGENT_STORE_DEFAULT_TTL_MINUTES:
        config["default_ttl"] = settings.AGENT_STORE_DEFAULT_TTL_MINUTES
    return config


@dataclass
class _LoopStore:
    store: BaseStore
    closers: list[Any] = field(default_factory=list)


_loops: PerLoop[_LoopStore] = PerLoop()
_by_loop = _loops.by_loop


async def get_store() -> BaseStore:
    """The durable store of this event loop (names as the store holds them:
    callers map namespaces with `internal` / `external`)."""
    entry = await _loops.get(lambda: _open(database_settings()))
    return entry.store


async def _open(settings_dict: dict[str, Any]) -> _LoopStore:
    try:
        if is_postgres(settings_dict):
            from langgraph.store.postgres.aio import AsyncPostgresStore

            # The pool belongs to the savers, which close it.
            store = AsyncPostgresStore(await shared_pool(), index=store_index(), ttl=ttl_config())  # type: ignore[arg-type]
            return _LoopStore(store)
        return await _open_sqlite(settings_dict)
    except CheckpointerUnavailable:
        raise
    except Exception as exc:
        raise CheckpointerUnavailable(f"cannot open the store: {exc}") from exc


async def _open_sqlite(settings_dict: dict[str, Any]) -> _LoopStore:
    import aiosqlite
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    conn = await aiosqlite.connect(settings_dict["NAME"], timeout=SQLITE_TIMEOUT_SECONDS, factory=VectorConnection)
    try:
        await conn.execute("PRAGMA busy_timeout=20000")
        # A deleted item's vectors go with it (store_vectors' foreign key),
        # as on Django's connection.
        await conn.execute("PRAGMA foreign_keys=ON")
        store = AsyncSqliteStore(conn, index=store_index(), ttl=ttl_config())  # type: ignore[arg-type]
        # `migrate` installed the tables, so this only registers the SQL
        # functions the store calls on its connection: its namespace
        # matching, and with an index sqlite-vec's distances.
        await store.setup()
    except BaseException:
        await asyncio.shield(conn.close())
        raise
    return _LoopStore(store, closers=[conn.close])


async def close_stores() -> None:
    """Close this loop's store (the shutdown hook, and test teardown)."""
    entry = _by_loop.pop(asyncio.get_running_loop(), None)
    if entry is None:
        return
    for close in entry.closers:
        try:
            await close()
        except Exception:  # a broken connection must not stop the shutdown
            logger.exception("closing the store's connection failed")
