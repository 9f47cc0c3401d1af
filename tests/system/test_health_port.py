"""The health port (AGENT_HEALTH_PORT, core.http.health_port) answers
within 100 ms while daphne is busy: under a burst of 400 cheap reads, and
with 400 streams open on a running turn (docs/operations.md, "Health").

How it stays robust on a loaded 2-core machine:
* the load comes from a process of its own, run at nice 10, so that its
  client work competes less with the server and the prober than the
  server's own work does;
* the probes are sequential raw HTTP/1.0 requests from this process, timed
  from connect to the end of the answer;
* the assertion is on the 90th percentile, and its ceiling is 100 ms or a
  tenth of the burst's median latency, whichever is larger: a machine so
  starved that the burst's cheap reads take ten times longer than usual
  stretches the probes with them, and the test then asks the same ratio.
  The streams have no such yardstick: their ceiling is 100 ms at the
  90th percentile, measured from the moment the re-attaches start opening
  (each replays the stream so far: the busiest part).

What it shows: `/api/health` on daphne's own port, probed alternately in
the same load (the figures in the assertion message), had a 90th
percentile of 350-580 ms under the burst, over the ceiling, and of
100-170 ms beside the opening streams; the health port's was 20-35 ms and
10-40 ms (SQLite and PostgreSQL, load average 4-10 on 2 cores). Answered
early on daphne's port (core.http.health_early), 300-350 ms under the
burst at load average 10-12, still over it.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time

import pytest

from sessions_app.services import api_key_create
from tests.system.server import ROOT, free_port

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

LOAD = 400
PROBES = 40

# burst: opens LOAD keep-alive connections, says "ready", sends one cheap
# read on each at once when told, and prints every answer's latency.
# streams: starts a slow turn, opens LOAD re-attaches to it that stay open
# (each reading what comes), says "ready", and holds them until told.
LOAD_SCRIPT = """
import asyncio, json, sys, time
from bench.client import Connection

async def burst(port, key):
    conns = [await Connection("127.0.0.1", port, key).open() for _ in range(LOAD)]
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    answers = []

    async def read(i, conn):
        started = time.monotonic()
        status, _ = await conn.request("GET", f"/api/sessions/busy-{i}")
        answers.append([time.monotonic() - started, status])

    await asyncio.gather(*(read(i, c) for i, c in enumerate(conns)))
    print(json.dumps(answers), flush=True)

async def streams(port, key):
    head = f"Host: 127.0.0.1:{port}\\r\\nAuthorization: Bearer {key}\\r\\n"
    body = json.dumps({"text": "Ada Lovelace"}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST /api/sessions/s1/turns/stream HTTP/1.1\\r\\n{head}Content-Type: application/json\\r\\n"
        f"Content-Length: {len(body)}\\r\\n\\r\\n".encode() + body
    )
    seen = b""
    while b"turn_id" not in seen:
        seen += await reader.read(4096)
    turn_id = seen.split(b'"turn_id": "')[1].split(b'"')[0].decode()
    print("started", flush=True)
    opened = []

    async def follow():
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(f"GET /api/sessions/s1/turns/{turn_id}/stream HTTP/1.1\\r\\n{head}\\r\\n".encode())
        status = int((await r.readline()).split()[1])
        opened.append((r, w, status))
        while await r.read(65536):
            pass

    tasks = [asyncio.create_task(follow()) for _ in range(LOAD)]
    while len(opened) < LOAD:
        await asyncio.sleep(0.05)
    print(json.dumps(sorted({s for _, _, s in opened})), flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    done = sum(t.done() for t in tasks)
    print(json.dumps(done), flush=True)

LOAD = int(sys.argv[4])
asyncio.run({"burst": burst, "streams": streams}[sys.argv[1]](int(sys.argv[2]), sys.argv[3]))
"""


def probe(port: int) -> tuple[float, int]:
    """(seconds, status) of one GET /api/health, connect to last byte."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"GET /api/health HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return time.monotonic() - started, int(answer.split()[1])


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def start_load(mode: str, server, key: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["nice", "-n", "10", sys.executable, "-c", LOAD_SCRIPT, mode, str(server.port), key, str(LOAD)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def probe_both(server, health_port: int, until) -> tuple[list[float], list[float]]:
    """Probes, alternately on the health port and on daphne's port, until
    `until()` or PROBES of each; (health port, daphne's port) latencies."""
    port: list[float] = []
    main: list[float] = []
    while len(port) < PROBES and not until(len(port)):
        latency, status = probe(health_port)
        assert status == 200
        port.append(latency)
        main.append(probe(server.port)[0])
    return port, main


def stop(load: subprocess.Popen) -> None:
    if load.poll() is None:
        os.killpg(load.pid, 9)
    load.wait(30)


def test_the_health_port_answers_ahead_of_a_burst_of_reads(servers):
    health_port = free_port()
    server = servers(AGENT_HEALTH_PORT=str(health_port))
    key = api_key_create(owner="alice")[1]
    load = start_load("burst", server, key)
    try:
        assert load.stdout.readline().strip() == "ready"
        load.stdin.write("go\n")
        load.stdin.flush()
        started = time.monotonic()
        # The burst takes about a second here; probes stop when it is
        # nearly done (a quarter of it answered counts as "under load").
        port, main = probe_both(server, health_port, lambda n: n >= 10 and time.monotonic() - started > 1.0)
        answers = json.loads(load.stdout.readline())
    finally:
        stop(load)
    assert {status for _, status in answers} == {404}, answers[:3]  # cheap reads: no such session
    burst_median = statistics.median(latency for latency, _ in answers)
    ceiling = max(0.1, burst_median / 10)
    figures = {"port p90": p90(port), "main port p90": p90(main), "burst median": burst_median, "port": port}
    assert p90(port) < ceiling, figures


def test_the_health_port_answers_beside_open_streams(servers):
    health_port = free_port()
    # Five tokens a second, to LOAD followers, for longer than the probes take.
    server = servers(AGENT_HEALTH_PORT=str(health_port), AGENT_OFFLINE_TOKEN_DELAY_MS="200")
    key = api_key_create(owner="alice")[1]
    load = start_load("streams", server, key)
    try:
        assert load.stdout.readline().strip() == "started"
        # From the first re-attach on: opening them (each replays the stream
        # so far) is the busiest part.
        port, main = probe_both(server, health_port, lambda n: False)
        assert json.loads(load.stdout.readline()) == [200]  # every re-attach opened
        load.stdin.write("done?\n")
        load.stdin.flush()
        still_open = LOAD - json.loads(load.stdout.readline())
    finally:
        stop(load)
    assert still_open == LOAD  # the probes ran while every stream was open
    figures = {"port p90": p90(port), "main port p90": p90(main), "port": port}
    assert p90(port) < 0.1, figures
