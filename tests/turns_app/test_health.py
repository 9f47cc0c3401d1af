"""GET /api/health: one bound for the whole answer, and no checkpointer opened."""

from __future__ import annotations

import json
import time

import pytest

from graphs.runtime import savers
from tests.fixtures.api import Api
from turns_app import health

pytestmark = pytest.mark.django_db(transaction=True)


async def test_health_is_ok_without_opening_a_checkpointer(monkeypatch):
    async def no_saver(*args, **kwargs):
        raise AssertionError("the health probe opened a checkpointer")

    monkeypatch.setattr(savers, "get_saver", no_saver)
    response = await Api(None).call("GET", "/health")
    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ok", "database": "ok", "checkpointer": "ok"}


async def test_a_hung_database_gets_a_503_within_the_probe_bound(monkeypatch):
    def hung():
        time.sleep(8)
        return {}

    monkeypatch.setattr(health, "_probe", hung)
    monkeypatch.setattr(health, "PROBE_SECONDS", 0.5)
    started = time.monotonic()
    response = await Api(None).call("GET", "/health")
    assert time.monotonic() - started < 1.0
    assert response.status_code == 503
    assert json.loads(response.content)["status"] == "unavailable"


async def test_health_answers_while_every_database_thread_is_busy():
    """Steps that hold every shared database thread (a slow query each) do
    not hold the probe: it has threads of its own (core.asyncdb.probe)."""
    import asyncio
    import threading

    from core.asyncdb import db, db_threads

    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow_step() -> None:
        entered.release()
        release.wait(30)

    steps = [asyncio.ensure_future(db(slow_step)) for _ in range(db_threads())]
    try:
        loop = asyncio.get_running_loop()
        for _ in steps:  # every shared thread is inside a step now
            assert await loop.run_in_executor(None, entered.acquire, True, 30)
        response = await Api(None).call("GET", "/health")
        assert response.status_code == 200, response.content
    finally:
        release.set()
        await asyncio.gather(*steps)
