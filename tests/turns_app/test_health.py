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


def _get(port: int, request: str) -> tuple[int, dict]:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_the_health_port_answers_the_route_s_body_and_its_errors_in_the_contract():
    """core.http.health_port with turns_app.health.PortProbe on its own
    connection: the route's answer; another path, another method, the
    API's error contract; a loop whose heartbeat is old, 503."""
    from core.http.health_port import Heartbeat, serve
    from tests.system.server import free_port

    heartbeat = Heartbeat()
    port = free_port()
    probe = health.PortProbe(heartbeat)
    server = serve("127.0.0.1", port, probe)
    try:
        assert _get(port, "GET /api/health HTTP/1.0\r\n\r\n") == (
            200,
            {"status": "ok", "database": "ok", "checkpointer": "ok"},
        )
        status, body = _get(port, "GET /api/sessions HTTP/1.0\r\n\r\n")
        assert (status, body["error"]["code"]) == (404, "not_found")
        status, body = _get(port, "POST /api/health HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
        assert (status, body["error"]["code"]) == (405, "method_not_allowed")
        heartbeat.last = time.monotonic() - 10  # the loop has not run a timer for 10 s
        status, body = _get(port, "GET /api/health HTTP/1.0\r\n\r\n")
        assert status == 503 and body["event_loop"].startswith("stalled for"), body
    finally:
        server.shutdown()
        server.server_close()
        probe.close()
