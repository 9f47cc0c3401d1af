"""`/api/health` keeps answering while the server is busy, on daphne's
own port: under a burst of cheap authenticated reads it is answered at the
outside of the application from an answer a thread keeps fresh
(core.http.health_early), ahead of the router, Django and the database
threads; and the route itself, which answers when that cannot (here: a
secure request, which gets HSTS), is not held by the burst either: reads
are admitted to the event loop a few at a time (core.http.admission) and
its probe does not queue on the shared database threads
(core.asyncdb.probe).

No fixed time is asserted (on a loaded 2-core machine any figure is noise).
The burst comes from a process of its own (bench's lean client), so that
its client work does not slow the probes down. Probes alternate, on fresh
connections, between the early answer and the route, and must come back
while most of the burst is still waiting, faster than the burst's median;
and every plain one must have been answered early, its answer kept fresh
through the burst. How much faster the early answer is (about half the
route's latency; docs/operations.md, "Health") is not asserted: on this
machine the two overlap.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time

import httpx
import pytest

from sessions_app.services import api_key_create
from tests.system.server import ROOT

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

BURST = 400
PROBES = 6

# Opens BURST keep-alive connections, says "ready", sends one cheap read on
# each at once, and prints every answer's wall-clock time and latency.
BURST_SCRIPT = """
import asyncio, json, sys, time
from bench.client import Connection

async def main(port, key, n):
    conns = [await Connection("127.0.0.1", port, key).open() for _ in range(n)]
    print("ready", flush=True)
    sys.stdin.readline()
    answers = []

    async def read(i, conn):
        started = time.monotonic()
        status, _ = await conn.request("GET", f"/api/sessions/busy-{i}")
        answers.append([time.time(), time.monotonic() - started, status])

    await asyncio.gather(*(read(i, c) for i, c in enumerate(conns)))
    print(json.dumps(answers), flush=True)
    for c in conns:
        await c.close()

asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
"""


def probe(port: int, *, secure: bool) -> tuple[float, int, bytes, bytes]:
    """(seconds, status, head, body) of one GET /api/health on a connection
    of its own, connect to last byte."""
    forwarded = "X-Forwarded-Proto: https\r\n" if secure else ""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"GET /api/health HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{forwarded}\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return time.monotonic() - started, int(head.split()[1]), head.lower(), body


def test_health_answers_ahead_of_a_burst_of_reads(servers):
    # A secure request goes to the route (HSTS), a plain one is answered early.
    server = servers(SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto", SECURE_HSTS_SECONDS="60")
    key = api_key_create(owner="alice")[1]
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for n in range(20):  # warm: the key is cached, every database thread started
            client.get(f"/api/sessions/warm-{n}", headers={"Authorization": f"Bearer {key}"})
    burst = subprocess.Popen(
        [sys.executable, "-c", BURST_SCRIPT, str(server.port), key, str(BURST)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert burst.stdout.readline().strip() == "ready"
        # A second probe wakes the refresher: until its answer is served.
        deadline = time.monotonic() + 30
        while b"content-length:" not in probe(server.port, secure=False)[2]:
            assert time.monotonic() < deadline, "no early answer"
        burst.stdin.write("go\n")
        burst.stdin.flush()
        early: list[tuple[float, float]] = []  # (wall-clock end, latency)
        route: list[tuple[float, float]] = []
        bodies = set()
        early_heads = set()
        for _ in range(PROBES):
            for secure, into in ((False, early), (True, route)):
                latency, status, head, body = probe(server.port, secure=secure)
                assert status == 200, body
                bodies.add(body)
                if not secure:
                    early_heads.add(b"content-length:" in head)
                into.append((time.time(), latency))
        answers = json.loads(burst.stdout.readline())
        assert burst.wait(120) == 0
    finally:
        if burst.poll() is None:
            os.killpg(burst.pid, 9)
            burst.wait(30)
    assert {status for _, _, status in answers} == {404}, answers[:3]  # cheap reads: no such session
    assert [json.loads(body) for body in bodies] == [{"status": "ok", "database": "ok", "checkpointer": "ok"}], bodies
    burst_median = statistics.median(latency for _, latency, _ in answers)

    def during(probes: list[tuple[float, float]]) -> tuple[list[int], list[float]]:
        before = [sum(1 for at, _, _ in answers if at <= end) for end, _ in probes]
        return before, [latency for (_, latency), n in zip(probes, before, strict=True) if n < BURST]

    early_before, early_during = during(early)
    route_before, route_during = during(route)
    figures = {
        "answered before each early probe": early_before,
        "early": [round(p[1], 3) for p in early],
        "route": [round(p[1], 3) for p in route],
        "burst median": burst_median,
    }
    # Health answered again and again while most of the burst still waited…
    assert sum(1 for n in early_before if n < BURST / 2) >= 3, figures
    assert sum(1 for n in route_before if n < BURST / 2) >= 3, figures
    # … faster than the burst's own requests were…
    assert statistics.median(route_during) < burst_median / 2, figures
    assert statistics.median(early_during) < burst_median / 2, figures
    # And every plain probe was answered early: its answer stayed fresh
    # through the burst (the early answer names its length, the route's,
    # streamed by Django, does not).
    assert early_heads == {True}, figures
