"""`GET /api/health` answered at the outside of the application
(core.http.health_early) from the answer a thread keeps fresh: the route's
body and headers, without the route; the route again when the answer is
stale, the request secure (HSTS), or the server stopping."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentsite.routing import build_application
from core.http import health_early
from core.http.health_port import Heartbeat
from tests.api.test_edge import call
from turns_app import health, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

OK = {"status": "ok", "database": "ok", "checkpointer": "ok"}


@pytest.fixture
def app(monkeypatch):
    def no_route_probe():
        raise AssertionError("the route probed")

    # The route, if reached, answers 503 `unavailable: AssertionError`.
    monkeypatch.setattr(health, "_probe", no_route_probe)
    return build_application()


def wait_fresh(refresher: health_early.Refreshed) -> None:
    """Until the refresher has an answer (the first ask wakes its thread)."""
    deadline = time.monotonic() + 10
    while refresher.fresh() is None:
        assert time.monotonic() < deadline, "no answer from the refresher"
        time.sleep(0.01)


@pytest.fixture
def refreshed(monkeypatch):
    """The server's refresher, on the real answer (its own connection)."""
    port_probe = health.PortProbe(Heartbeat())
    refresher = health_early.Refreshed(port_probe).start()
    monkeypatch.setattr(health, "refreshed", refresher)
    wait_fresh(refresher)
    yield refresher
    refresher.stop()
    port_probe.close()


async def test_a_fresh_answer_is_served_ahead_of_the_route(app, refreshed):
    answer = await call(app, "GET", "/api/health")
    assert answer.status == 200, answer.body
    assert answer.json == OK
    # The route's headers: the edge's, and SecurityMiddleware's COOP.
    assert answer.headers["content-type"] == "application/json; charset=utf-8"
    assert answer.headers["content-length"] == str(len(answer.body))
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "same-origin"
    assert answer.headers["cross-origin-opener-policy"] == "same-origin"


async def test_an_unhealthy_answer_is_served_as_it_is(app, monkeypatch):
    down = {"status": "unavailable", "database": "unavailable: OperationalError", "checkpointer": "unknown"}
    refresher = health_early.Refreshed(lambda: (503, down)).start()
    monkeypatch.setattr(health, "refreshed", refresher)
    try:
        await asyncio.to_thread(wait_fresh, refresher)
        got = await call(app, "GET", "/api/health")
    finally:
        refresher.stop()
    assert (got.status, got.json) == (503, down)


async def test_a_stale_answer_leaves_it_to_the_route(app, refreshed, monkeypatch):
    monkeypatch.setattr(health_early, "FRESH_SECONDS", -1.0)
    answer = await call(app, "GET", "/api/health")
    assert answer.status == 503
    assert answer.json["database"] == "unavailable: AssertionError"


async def test_a_stopping_server_says_so_at_once(app, refreshed, monkeypatch):
    monkeypatch.setattr(shutdown, "stopping", lambda: True)
    answer = await call(app, "GET", "/api/health")
    assert (answer.status, answer.json) == (503, health.STOPPING)


async def test_a_secure_request_gets_the_route_and_its_hsts(app, refreshed, settings):
    settings.SECURE_HSTS_SECONDS = 60
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    app = build_application()  # SecurityMiddleware reads its settings once
    plain = await call(app, "GET", "/api/health")
    secure = await call(app, "GET", "/api/health", headers={"X-Forwarded-Proto": "https"})
    assert plain.status == 200 and "strict-transport-security" not in plain.headers
    assert secure.status == 503 and secure.json["database"] == "unavailable: AssertionError"
    assert secure.headers["strict-transport-security"] == "max-age=60"


async def test_another_host_or_method_is_left_to_the_edge_and_the_route(app, refreshed):
    assert (await call(app, "GET", "/api/health", host="evil.example")).json["error"]["code"] == "disallowed_host"
    assert (await call(app, "HEAD", "/api/health")).status == 405
