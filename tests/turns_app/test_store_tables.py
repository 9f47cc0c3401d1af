"""A committing turn's store writes (turns_app.store_tables.apply_write, on
Django's connection) against LangGraph's real store, on whichever database
the suite runs: what it writes reads back through the store as the store's
own `aput` writes it, TTL included; a delete removes the item; a commit that
rolls back leaves nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection, transaction

from graphs.runtime.store import get_store
from tests.fixtures.runners import orm
from turns_app.store_tables import apply_write

pytestmark = pytest.mark.django_db(transaction=True)


def row(prefix: str, key: str) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ttl_minutes, expires_at IS NOT NULL FROM store WHERE prefix = %s AND key = %s", [prefix, key]
        )
        return cursor.fetchone()


def committed(payload: dict[str, Any], *, roll_back: bool = False) -> None:
    class RolledBack(Exception):
        pass

    try:
        with transaction.atomic():
            apply_write(payload, None)
            if roll_back:
                raise RolledBack
    except RolledBack:
        pass


def payload(namespace: tuple[str, ...], key: str, value: dict[str, Any] | None, ttl: float | None = None):
    return {"namespace": list(namespace), "key": key, "value": value, "index": None, "ttl": ttl}


async def test_a_commits_store_write_reads_back_as_the_stores_own():
    store = await get_store()
    ns = ("owner:conformance", uuid.uuid4().hex)
    value = {"text": "hello", "nested": {"n": [1, 2.5, None, True]}, "unicode": "ünï"}

    await orm(committed, payload=payload(ns, "ours", value, ttl=30))
    await store.aput(ns, "theirs", value, ttl=30)
    ours, theirs = await store.aget(ns, "ours"), await store.aget(ns, "theirs")
    assert ours is not None and theirs is not None
    assert (ours.namespace, ours.value) == (theirs.namespace, theirs.value) == (ns, value)
    assert await orm(row, prefix=".".join(ns), key="ours") == await orm(row, prefix=".".join(ns), key="theirs")
    assert await orm(row, prefix=".".join(ns), key="ours") == (30, True)
    assert sorted(i.key for i in await store.asearch(ns, filter={"text": "hello"})) == ["ours", "theirs"]

    # Rewritten without a TTL, then deleted, by later commits.
    await orm(committed, payload=payload(ns, "ours", {"text": "again"}))
    assert (await store.aget(ns, "ours")).value == {"text": "again"}
    assert await orm(row, prefix=".".join(ns), key="ours") == (None, False)
    await orm(committed, payload=payload(ns, "ours", None))
    assert await store.aget(ns, "ours") is None

    # A commit that rolls back writes nothing.
    await orm(committed, payload=payload(ns, "never", {"text": "no"}), roll_back=True)
    assert await store.aget(ns, "never") is None
    # The store's own write is on its own connection, outside the test's
    # transaction: removed here, or later tests listing namespaces see it.
    await store.adelete(ns, "theirs")
