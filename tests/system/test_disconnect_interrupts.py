"""A long read stops when its client goes away (core.asyncdb.interruptible):
thread searches whose statement runs for minutes (the `search` fault point
with `stall`: pg_sleep, or an SQLite recursive count) hold every database
thread; their clients hang up; the statements are interrupted and the
threads free, so a read queued behind them is answered at once — without
the interrupt it waited for the minutes the statements had left.

Events, not clocks, as far as they go: the searches hold every thread
(PostgreSQL: that many `pg_sleep` statements active; both: a cheap read is
still unanswered after 2 s, which an idle server answers in milliseconds),
then that read must come back within a ceiling far below the statements'
length, and (PostgreSQL) no `pg_sleep` is left running."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from django.db import connection

from core.database import is_postgres
from sessions_app.services import api_key_create

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

POOL = 4  # PostgreSQL: database threads (one per pooled connection)
SQLITE_THREADS = 8  # core.asyncdb.db_threads without a pool
PENDING_SECONDS = 2.0
CEILING_SECONDS = 30.0  # the statements run for 300 s (PostgreSQL), minutes (SQLite)


def send(port: int, key: str, method: str, path: str, body: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=CEILING_SECONDS)
    sock.sendall(
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    return sock


def sleeping() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep%'")
        return cursor.fetchone()[0]


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + CEILING_SECONDS
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def queue_a_read(port: int, key: str) -> socket.socket:
    """A cheap read left waiting for a database thread: the searches hold
    them all once a read is still unanswered after PENDING_SECONDS (one
    answered sooner came before they did; the next is sent)."""
    deadline = time.monotonic() + CEILING_SECONDS
    while time.monotonic() < deadline:
        read = send(port, key, "GET", "/api/sessions/queued")
        read.settimeout(PENDING_SECONDS)
        try:
            read.recv(65536)
        except TimeoutError:
            return read
        read.close()
    raise AssertionError("the searches never held every database thread")


def test_a_search_whose_client_hangs_up_frees_its_database_thread(servers):
    postgres = is_postgres(connection.settings_dict)
    server = servers(AGENT_FAULT_POINT="search", AGENT_FAULT_ACTION="stall", DB_POOL_MAX_SIZE=str(POOL))
    key = api_key_create(owner="alice")[1]
    threads = POOL if postgres else SQLITE_THREADS
    searches = [send(server.port, key, "POST", "/langgraph/threads/search", b"{}") for _ in range(threads + 2)]
    try:
        if postgres:
            wait_for(lambda: sleeping() == threads, "the searches never held every database thread")
        queued = queue_a_read(server.port, key)
        for search in searches:
            search.close()
        queued.settimeout(CEILING_SECONDS)
        started = time.monotonic()
        head = queued.recv(65536)
        waited = time.monotonic() - started
    finally:
        for search in searches:
            search.close()
    assert head.split()[1] == b"404", head  # answered: no such session
    assert waited < CEILING_SECONDS
    if postgres:
        wait_for(lambda: sleeping() == 0, "a search's statement still runs")
    assert httpx.get(f"{server.url}/api/health", timeout=CEILING_SECONDS).json()["status"] == "ok"
    queued.close()
