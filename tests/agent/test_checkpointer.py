"""The checkpointer's lifecycle: a pool that cannot open is closed whatever
stopped it, so probes and turns during an outage leak nothing."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import psycopg_pool
import pytest

from core.database import CONNECT_TIMEOUT_SECONDS
from graphs.runtime import savers


@pytest.fixture
def blackhole():
    """A TCP port that accepts connections and never says a word: what a
    PostgreSQL server behind a dead network path looks like to a client."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


async def test_a_pool_whose_opening_is_cancelled_is_closed(blackhole, monkeypatch):
    pools: list[psycopg_pool.AsyncConnectionPool] = []

    real_init = psycopg_pool.AsyncConnectionPool.__init__

    def recorded(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        pools.append(self)

    monkeypatch.setattr(psycopg_pool.AsyncConnectionPool, "__init__", recorded)
    dead = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "x",
        "USER": "x",
        "HOST": "127.0.0.1",
        "PORT": blackhole,
        "OPTIONS": {},
    }
    monkeypatch.setattr(savers, "database_settings", lambda: dead)
    for _ in range(3):  # three probes during an outage
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(savers.get_saver(), 0.3)
    assert len(pools) == 3
    assert all(pool.closed for pool in pools)
    # Nothing of the pools keeps running on the loop once their connection
    # attempts give up (connect_timeout), though the server never answers.
    deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS + 3
    while leftovers := [t for t in asyncio.all_tasks() if "AsyncConnectionPool" in repr(t.get_coro())]:
        assert time.monotonic() < deadline, leftovers
        await asyncio.sleep(0.1)
