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
