"""The booking graph's side effects with real server processes (docs/graphs.md, "Effects"):
a database effect lands exactly once whatever window the server dies in;
an outside service sees one key for a request however often it is retried;
a cancel stops a turn on whichever process runs it."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx
import pytest
from httpx_sse import connect_sse

from graphs.booking.models import Booking
from sessions_app.models import AgentSession
from tests.system import report
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

BOOK = "Book a table for 3 people on 2031-06-01 at 20:00, my name is Ada Lovelace"
APPROVE = {"resume": {"decisions": [{"type": "approve"}]}}


class Reservations(BaseHTTPRequestHandler):
    """A fake outside reservation service that deduplicates on Idempotency-Key."""

    seen: ClassVar[list[str]] = []
    performed: ClassVar[dict[str, str]] = {}
    lock = threading.Lock()

    def do_POST(self) -> None:
        key = self.headers["Idempotency-Key"]
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.lock:
            self.seen.append(key)
            confirmation = self.performed.setdefault(key, f"R-{len(self.performed) + 1}")
        body = json.dumps({"confirmation": confirmation}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def reservations():
    Reservations.seen, Reservations.performed = [], {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Reservations)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/reservations"
    server.shutdown()
    server.server_close()


def client_of(server, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=20, headers={"Authorization": f"Bearer {key}"})


def pause(client: httpx.Client, session: str = "b1") -> dict:
    assert client.post("/api/sessions", json={"key": session, "graph": "booking"}).status_code == 201
    paused = client.post(f"/api/sessions/{session}/turns", json={"text": BOOK})
    assert paused.status_code == 200 and paused.json()["status"] == "interrupted", paused.text
    return paused.json()


def resume(client: httpx.Client, idem: str, session: str = "b1") -> httpx.Response:
    return client.post(f"/api/sessions/{session}/turns", json=APPROVE, headers={"Idempotency-Key": idem})


def killed(server) -> None:
    code = server.process.wait(10)
    assert code == -9, server.log_text()


def expire_lease(server) -> None:
    """On PostgreSQL the dead resume holds the session until its lease runs out."""
    deadline = time.monotonic() + 10
    while (s := AgentSession.objects.get(key="b1")).lease_expires_at and time.time() < s.lease_expires_at.timestamp():
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("window", ["before_commit", "after_commit"])
def test_an_outside_call_and_a_booking_happen_once_across_a_crash(servers, alice, reservations, window):
    server = servers(AGENT_BOOKING_SERVICE_URL=reservations, AGENT_TURN_LEASE_SECONDS="1")
    with client_of(server, alice) as client:
        pause(client)
    server.restart(AGENT_FAULT_POINT=window, AGENT_FAULT_ACTION="kill")
    with client_of(server, alice) as client, pytest.raises(httpx.TransportError):
        resume(client, "approve-1")
    killed(server)
    # The tool ran and called the service; the booking row waits for a commit.
    assert len(Reservations.seen) == 1
    assert Booking.objects.count() == (1 if window == "after_commit" else 0)

    for name in ("AGENT_FAULT_POINT", "AGENT_FAULT_ACTION"):
        server.env.pop(name)
    server.restart(AGENT_SESSION_WAIT_SECONDS="10")
    expire_lease(server)
    with client_of(server, alice) as client:
        retried = resume(client, "approve-1")
    assert retried.status_code == 200, retried.text
    (booking,) = Booking.objects.all()
    if window == "before_commit":
        # The retry ran the tool again: the service saw the same key twice and
        # reserved once; the row came with the retry's commit.
        assert len(Reservations.seen) == 2 and len(set(Reservations.seen)) == 1
        assert booking.confirmation == "R-1"
    else:
        # Committed before the crash: the retry replays it, no call, no row.
        assert retried.headers["idempotent-replayed"] == "true"
        assert len(Reservations.seen) == 1
    assert len(Reservations.performed) == 1
    assert retried.json()["effects"][0]["result"]["reference"] == booking.reference
    report.record(
        f"13 booking, crash {window.replace('_', ' ')}",
        attempted=3,
        committed=AgentTurn.objects.filter(status__in=["committed", "interrupted"]).count(),
        aborted=AgentTurn.objects.filter(status="aborted").count(),
        lost=0,
        duplicated=Booking.objects.count() - 1,
        bookings=Booking.objects.count(),
    )


@pytest.mark.postgres_only
def test_a_cancel_on_one_process_stops_the_turn_running_on_another(servers, alice):
    a = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="200")
    b = servers()
    events = []
    with client_of(a, alice) as on_a, client_of(b, alice) as on_b:
        started = threading.Event()

        def follow() -> None:
            with connect_sse(on_a, "POST", "/api/sessions/s1/turns/stream", json={"text": "Ada Lovelace"}) as source:
                for event in source.iter_sse():
                    events.append(event)
                    if event.event == "delta":
                        started.set()

        reader = threading.Thread(target=follow)
        reader.start()
        assert started.wait(20), a.log_text()
        turn_id = json.loads(events[0].data)["turn_id"]
        sent = time.monotonic()
        cancelled = on_b.post(f"/api/sessions/s1/turns/{turn_id}/cancel")
        reader.join(20)
        heard_after = time.monotonic() - sent
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "aborted"
    assert events[-1].event == "error" and json.loads(events[-1].data)["code"] == "turn_cancelled"
    assert heard_after < 2, heard_after  # woken through NOTIFY, not a lease check
    assert AgentSession.objects.get(key="s1").version == 0
    assert AgentTurn.objects.get(pk=turn_id).status == "aborted"
