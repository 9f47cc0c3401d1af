"""core.asyncdb.db: database steps on their own threads, without a
health-check round trip per checkout (docs/scale.md, "Round trips") — yet a connection that died
in the pool (a PostgreSQL restart) costs no failed request, and a step that
had already done something is never run twice."""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest
from django.db import connection

from core.asyncdb import db
from core.database import database_settings, postgres_conninfo
from core.errors import StorageUnavailable

pytestmark = [pytest.mark.django_db(transaction=True)]


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def terminate(pids: set[int]) -> None:
    with psycopg.connect(postgres_conninfo(database_settings()), autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.mark.postgres_only
async def test_a_connection_that_died_in_the_pool_is_replaced_without_an_error():
    pids = {await db(backend_pid) for _ in range(5)}
    terminate(pids)
    calls = []

    def step() -> int:
        calls.append(threading.current_thread().name)
        return backend_pid()

    fresh = await db(step)
    assert fresh not in pids
    assert len(calls) == 2 and calls[0].startswith("agentsite-db")  # the dead one, then a fresh one


@pytest.mark.postgres_only
async def test_a_step_that_already_did_something_is_not_run_again():
    calls = []

    def step() -> None:
        calls.append(1)
        pid = backend_pid()  # answered: from here on a retry could repeat work
        terminate({pid})
        backend_pid()

    with pytest.raises(StorageUnavailable):
        await db(step)
    assert calls == [1]
    assert await db(backend_pid)  # and the next step gets a live connection


async def test_steps_run_on_the_database_threads_with_the_callers_context():
    import contextvars

    var = contextvars.ContextVar("var", default="unset")
    var.set("caller")
    seen = await db(lambda: (threading.current_thread().name, var.get()))
    assert seen[0].startswith("agentsite-db") and seen[1] == "caller"


async def test_with_debug_on_the_threads_keep_no_query_log(settings):
    """DEBUG logs every statement on the connection; Django clears that log
    when a request starts, which the database threads never see."""
    settings.DEBUG = True
    from core.asyncdb import db_threads

    def step() -> tuple[str, int]:
        kept = len(connection.queries_log)  # what the thread held between steps
        for _ in range(20):
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        assert len(connection.queries_log) >= 20  # DEBUG is on: it did log them
        return threading.current_thread().name, kept

    seen: list[tuple[str, int]] = []
    for _ in range(4):  # every thread takes steps, more than once
        seen += await asyncio.gather(*(db(step) for _ in range(db_threads())))
    assert [kept for _, kept in seen] == [0] * len(seen)
