"""`make bench`: agentsite against bare LangGraph (the floor), side by side,
in one run, on this machine.

    .venv/bin/python -m bench.run                 # 3 interleaved rounds, a few minutes
    .venv/bin/python -m bench.run --smoke         # a few turns of everything (the suite runs this)

Both sides run the same graph (bench.graphs: one chat node) with the same
offline model (token delay 0, so the service's own cost is what shows).
agentsite runs as a real daphne process (DEBUG off) on PostgreSQL and on
SQLite, driven over HTTP by a lean keep-alive client; the floor runs
in-process (bench.floor), no HTTP. Every round runs every side; the table
shows medians over rounds and the ratios agentsite ÷ floor against the
targets in (docs/scale.md, "Targets"). CPU is the server process's (/proc), statements are
what PostgreSQL logged for the benchmark's database (log_statement=all for
a short counting pass, reset afterwards), the machine's load is printed
with each round. Results also go to artifacts/bench.json.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.client import Connection, ServerError

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
TEXT = "Hello! I would like to book a table for four people next Friday evening."
GRAPHS = (
    "intake=graphs.intake.graph:build_intake_graph,"
    "booking=graphs.booking.graph:build_booking_graph,"
    "chat=bench.graphs:build_chat_graph"
)
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Sizes:
    fresh: int = 200
    same: int = 200
    clients: int = 20
    per_client: int = 20
    contention_clients: int = 5
    contention_turns: int = 20
    sse: int = 50
    count: int = 20
    rounds: int = 3
    # Within a round the sides alternate every `fresh_piece` fresh turns,
    # every `sse_piece` SSE turns and every 20 × 20 batch.
    fresh_piece: int = 25
    sse_piece: int = 10
    batches: int = 3


SMOKE = Sizes(
    fresh=5,
    same=40,
    clients=3,
    per_client=2,
    contention_clients=2,
    contention_turns=2,
    sse=3,
    count=3,
    rounds=1,
    batches=1,
)


# --- processes and databases -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def base_env(database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "DATABASE_URL": database_url,
        "DEBUG": "false",
        "SECRET_KEY": "bench-" + uuid.uuid4().hex,
        "ALLOWED_HOSTS": f"{HOST},localhost",
        "AGENT_GRAPHS": GRAPHS,
        "AGENT_GRAPH": "chat",
        "AGENT_MODEL": "offline",
        "AGENT_OFFLINE_TOKEN_DELAY_MS": "0",
        "AGENT_SESSION_WAIT_SECONDS": "60",
        # A full run creates a few thousand sessions for its one owner.
        "AGENT_MAX_SESSIONS_PER_OWNER": "1000000",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip()


@dataclass
class Database:
    kind: str  # "postgresql" | "sqlite"
    url: str
    admin_url: str | None = None  # PostgreSQL: where to create/drop it
    name: str | None = None
    tmp: str | None = None

    @classmethod
    def postgres(cls, admin_url: str, name: str) -> Database:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        base = admin_url.rsplit("/", 1)[0]
        return cls("postgresql", f"{base}/{name}", admin_url, name)

    @classmethod
    def sqlite(cls) -> Database:
        tmp = tempfile.mkdtemp(prefix="agentsite-bench-")
        return cls("sqlite", f"sqlite:///{tmp}/bench.sqlite3", tmp=tmp)

    def drop(self) -> None:
        if self.kind == "postgresql":
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        elif self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.kind == "postgresql":
            with psycopg.connect(self.url) as conn:
                return conn.execute(sql, params).fetchall()
        import sqlite3

        with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql.replace("%s", "?"), params).fetchall()


class Server:
    """One daphne process serving the benchmark's database."""

    def __init__(self, database: Database, log: Path) -> None:
        self.database = database
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> Server:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [str(BIN / "daphne"), "-b", HOST, "-p", str(self.port), "agentsite.asgi:application"],
                cwd=ROOT,
                env=base_env(self.database.url),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection((HOST, self.port), timeout=1) as sock:
                    sock.sendall(f"GET /api/health HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
                    if b" 200 " in sock.recv(100):
                        return self
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    @property
    def cpu(self) -> float:
        return cpu_of(self.process.pid)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


# --- measurements -------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Result:
    """One side's figures for one round."""

    values: dict[str, float] = field(default_factory=dict)

    def add_latencies(self, prefix: str, latencies: list[float], seconds: float, cpu: float | None) -> None:
        self.values[f"{prefix}.p50_ms"] = 1000 * statistics.median(latencies)
        self.values[f"{prefix}.p95_ms"] = 1000 * percentile(latencies, 0.95)
        self.values[f"{prefix}.p99_ms"] = 1000 * percentile(latencies, 0.99)
        self.values[f"{prefix}.turns_per_s"] = len(latencies) / seconds
        if cpu is not None:
            self.values[f"{prefix}.cpu_ms"] = 1000 * cpu / len(latencies)


async def chat(conn: Connection, key: str, idem: str | None = None) -> tuple[float, int, bytes]:
    started = time.perf_counter()
    headers = {"Idempotency-Key": idem} if idem else {}
    status, body = await conn.request("POST", f"/api/sessions/{key}/turns", {"text": TEXT}, **headers)
    return time.perf_counter() - started, status, body


async def connections(server: Server, api_key: str, n: int) -> list[Connection]:
    return [await Connection(HOST, server.port, api_key).open() for _ in range(n)]


@dataclass
class Samples:
    """One side's turns of one scenario in one round, gathered piece by piece."""

    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu: float = 0.0
    rates: list[float] = field(default_factory=list)  # turns/s of each piece

    def add(self, latencies: list[float], seconds: float, cpu: float) -> None:
        self.latencies += latencies
        self.seconds += seconds
        self.cpu += cpu
        self.rates.append(len(latencies) / seconds)

    def into(self, result: Result, prefix: str) -> None:
        result.add_latencies(prefix, self.latencies, self.seconds, self.cpu)
        # Several batches: the median batch, so one hiccup of the machine
        # does not move the figure.
        result.values[f"{prefix}.turns_per_s"] = statistics.median(self.rates)


def pieces(total: int, size: int) -> list[int]:
    return [min(size, total - start) for start in range(0, total, size)]


class FloorWorker:
    """The floor (bench.floor --serve) in a process of its own for the whole
    run, warm, taking one scenario piece at a time: its pieces run between
    agentsite's, so both sides see the machine as it is at that moment."""

    def __init__(self, pg_admin: str, database: str, log: Path) -> None:
        url = pg_admin.rsplit("/", 1)[0] + "/" + database
        self.log = log
        with open(log, "ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bench.floor", "--db", url, "--serve"],
                cwd=ROOT,
                env=base_env("sqlite:///" + tempfile.gettempdir() + "/agentsite-floor-unused.sqlite3"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )

    def run(self, scenario: str, turns: int, clients: int = 1) -> dict[str, Any]:
        command = {"scenario": scenario, "turns": turns, "clients": clients}
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"bench.floor {scenario} failed:\n{self.log.read_text()[-3000:]}")
        return json.loads(line)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


class Agentsite:
    """One target's servers (the second one, on PostgreSQL, for the
    two-process figure) and its client connections for a round."""

    def __init__(self, servers: list[Server], api_key: str, database: Database) -> None:
        self.servers, self.api_key, self.database = servers, api_key, database
        self.conn: Connection | None = None
        self.tag = ""

    @property
    def server(self) -> Server:
        return self.servers[0]

    async def open(self, tag: str) -> None:
        self.tag = tag
        (self.conn,) = await connections(self.server, self.api_key, 1)
        for i in range(10):  # warm up
            await chat(self.conn, f"warm-{tag}-{i}")

    async def close(self) -> None:
        await self.conn.close()

    async def fresh(self, start: int, n: int) -> tuple[list[float], float, float]:
        cpu0, t0 = self.server.cpu, time.perf_counter()
        latencies = []
        for i in range(start, start + n):
            seconds, status, body = await chat(self.conn, f"fresh-{self.tag}-{i}")
            assert status == 200, body
            latencies.append(seconds)
        return latencies, time.perf_counter() - t0, self.server.cpu - cpu0

    async def same(self, sizes: Sizes, result: Result) -> None:
        """Sequential, one session: the last 20 turns against the first 20."""
        key, latencies = f"same-{self.tag}", []
        cpu0, t0 = self.server.cpu, time.perf_counter()
        for _ in range(sizes.same):
            seconds, status, body = await chat(self.conn, key)
            assert status == 200, body
            latencies.append(seconds)
        result.add_latencies("same", latencies, time.perf_counter() - t0, self.server.cpu - cpu0)
        windows(result, latencies, sizes)

    async def contention(self, sizes: Sizes, result: Result) -> None:
        """A few clients on one session: all must commit, in turn."""
        conns = await connections(self.server, self.api_key, sizes.contention_clients)
        key = f"contended-{self.tag}"
        outcomes: list[tuple[float, int, bytes]] = []

        async def client(c: Connection, n: int) -> None:
            for i in range(sizes.contention_turns):
                outcomes.append(await chat(c, key, idem=f"{n}-{i}"))

        t0 = time.perf_counter()
        await asyncio.gather(*(client(c, n) for n, c in enumerate(conns)))
        seconds = time.perf_counter() - t0
        for c in conns:
            await c.close()
        ok = [o for o in outcomes if o[1] == 200]
        result.add_latencies("contention", [o[0] for o in ok] or [seconds], seconds, None)
        result.values["contention.committed"] = len(ok)
        result.values["contention.refused"] = len(outcomes) - len(ok)
        acknowledged = {json.loads(o[2])["turn_id"] for o in ok}
        result.values["contention.lost"] = len(acknowledged - committed_turns(self.database, key))

    async def sse(self, start: int, n: int) -> tuple[list[float], list[float]]:
        firsts, dones = [], []
        for i in range(start, start + n):
            status, first, done, names = await self.conn.stream(
                f"/api/sessions/sse-{self.tag}-{i}/turns/stream", {"text": TEXT}
            )
            assert status == 200 and names[-1] == "done", names
            firsts.append(first)
            dones.append(done)
        return firsts, dones


def windows(result: Result, latencies: list[float], sizes: Sizes) -> None:
    if sizes.same >= 40:
        result.values["same.last20_over_first20"] = statistics.median(latencies[-20:]) / statistics.median(
            latencies[:20]
        )
        result.values["same.first20_ms"] = 1000 * statistics.median(latencies[:20])
        result.values["same.last20_ms"] = 1000 * statistics.median(latencies[-20:])


def committed_turns(database: Database, key: str) -> set[str]:
    rows = database.query(
        "SELECT t.id FROM agent_turns t JOIN agent_sessions s ON s.id = t.session_id "
        "WHERE s.key = %s AND t.status = 'committed' AND t.messages IS NOT NULL",
        (key,),
    )
    return {str(uuid.UUID(str(r[0]))) for r in rows}


async def many_clients(servers: list[Server], api_key: str, sizes: Sizes, tag: str):
    conns = []
    for n in range(sizes.clients):
        conns += await connections(servers[n % len(servers)], api_key, 1)
    latencies: list[float] = []

    async def client(c: Connection, n: int) -> None:
        for i in range(sizes.per_client):
            seconds, status, body = await chat(c, f"{tag}-{n}-{i}")
            assert status == 200, body
            latencies.append(seconds)

    cpu0 = sum(s.cpu for s in servers)
    t0 = time.perf_counter()
    await asyncio.gather(*(client(c, n) for n, c in enumerate(conns)))
    seconds = time.perf_counter() - t0
    cpu = sum(s.cpu for s in servers) - cpu0
    for c in conns:
        await c.close()
    return latencies, seconds, cpu


async def one_round(
    order: list[str], targets: dict[str, Agentsite], floor: FloorWorker, sizes: Sizes, round_: int
) -> dict[str, Result]:
    """Every scenario, one after the other; within each, every side in
    `order`, in pieces that alternate between the sides (fresh and SSE
    turns a few at a time, the 20 × 20 load batch by batch), so a change in
    the machine's load lands on every side alike."""
    results = {side: Result() for side in order}
    sides = [s for s in order if s != "floor"]
    for side in sides:
        await targets[side].open(f"{side[:2]}{round_}{uuid.uuid4().hex[:4]}")

    fresh = {side: Samples() for side in order}
    start = 0
    for n in pieces(sizes.fresh, sizes.fresh_piece):
        for side in order:
            if side == "floor":
                out = floor.run("fresh", n)
                fresh[side].add(out["latencies"], out["seconds"], out["cpu_seconds"])
            else:
                fresh[side].add(*await targets[side].fresh(start, n))
        start += n
    for side in order:
        fresh[side].into(results[side], "fresh")

    for side in order:
        if side == "floor":
            out = floor.run("same", sizes.same)
            results[side].add_latencies("same", out["latencies"], out["seconds"], out["cpu_seconds"])
            windows(results[side], out["latencies"], sizes)
        else:
            await targets[side].same(sizes, results[side])

    concurrent = {side: Samples() for side in order}
    two = {side: Samples() for side in sides if len(targets[side].servers) > 1}
    for batch in range(sizes.batches):
        for side in order:
            if side == "floor":
                out = floor.run("concurrent", sizes.per_client, sizes.clients)
                concurrent[side].add(out["latencies"], out["seconds"], out["cpu_seconds"])
                continue
            target = targets[side]
            concurrent[side].add(
                *await many_clients(target.servers[:1], target.api_key, sizes, f"c-{target.tag}-{batch}")
            )
            if side in two:
                two[side].add(*await many_clients(target.servers, target.api_key, sizes, f"t-{target.tag}-{batch}"))
    for side in order:
        concurrent[side].into(results[side], "concurrent")
    for side, samples in two.items():
        results[side].values["two_processes.turns_per_s"] = statistics.median(samples.rates)

    for side in order:
        if side == "floor":
            results[side].values["contention.lost"] = floor.run(
                "contention", sizes.contention_turns, sizes.contention_clients
            )["lost"]
        else:
            await targets[side].contention(sizes, results[side])

    firsts: dict[str, list[float]] = {side: [] for side in order}
    dones: dict[str, list[float]] = {side: [] for side in order}
    start = 0
    for n in pieces(sizes.sse, sizes.sse_piece):
        for side in order:
            if side == "floor":
                out = floor.run("first_token", n)
                firsts[side] += out["first_tokens"]
                dones[side] += out["latencies"]
            else:
                more_firsts, more_dones = await targets[side].sse(start, n)
                firsts[side] += more_firsts
                dones[side] += more_dones
        start += n
    for side in order:
        results[side].values["sse.first_delta_ms"] = 1000 * statistics.median(firsts[side])
        results[side].values["sse.done_ms"] = 1000 * statistics.median(dones[side])

    for side in sides:
        await targets[side].close()
    return results


# A round the server failed (an error status, a connection it dropped
# unanswered, a broken answer): reported with the servers' last words, and
# the bench goes on to its table. A keep-alive connection the server closed
# while idle is no failure: bench.client reopens it.
SERVER_FAILURES = (ServerError, AssertionError, ConnectionError, asyncio.IncompleteReadError, ValueError)


def all_alive(servers: dict[str, list[Server]]) -> bool:
    return all(s.process is not None and s.process.poll() is None for group in servers.values() for s in group)


def server_failure(where: str, exc: BaseException, servers: dict[str, list[Server]]) -> str:
    print(f"{where}: server error: {type(exc).__name__}: {str(exc)[:500]}", file=sys.stderr, flush=True)
    for group in servers.values():
        for server in group:
            state = "running" if server.process and server.process.poll() is None else "exited"
            tail = server.log.read_text(errors="replace")[-2000:] if server.log.exists() else ""
            print(f"--- {server.log} ({state}), last lines:\n{tail}", file=sys.stderr, flush=True)
    return f"{where}: server error: {type(exc).__name__}: {str(exc)[:200]}"


# --- statements and bytes per turn (PostgreSQL) ---------------------------------------------------


def postgres_log() -> Path | None:
    found = sorted(glob.glob("/var/log/postgresql/postgresql-*-main.log"))
    return Path(found[-1]) if found else None


class StatementLog:
    """log_statement=all for the length of a `with`, then reset: counts the
    statements PostgreSQL received for one database. The log is read as a
    file when this user may, else through the server (pg_read_binary_file,
    for a superuser: the log is often readable by postgres only)."""

    def __init__(self, admin_url: str, database: str) -> None:
        self.admin_url, self.database, self.path = admin_url, database, postgres_log()
        self.offset = 0

    def __enter__(self) -> StatementLog:
        if self.path is not None:
            self._set("all")
            self.offset = self._size()
        return self

    def __exit__(self, *exc) -> None:
        if self.path is not None:
            self._set(None)

    def _set(self, value: str | None) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            if value is None:
                conn.execute("ALTER SYSTEM RESET log_statement")
            else:
                conn.execute(f"ALTER SYSTEM SET log_statement = '{value}'")
            conn.execute("SELECT pg_reload_conf()")
        time.sleep(0.3)  # the backends pick the setting up

    def _size(self) -> int:
        if os.access(self.path, os.R_OK):
            return self.path.stat().st_size
        with psycopg.connect(self.admin_url) as conn:
            return conn.execute("SELECT (pg_stat_file(%s)).size", (str(self.path),)).fetchone()[0]

    def _read(self) -> bytes:
        if os.access(self.path, os.R_OK):
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                return handle.read()
        with psycopg.connect(self.admin_url) as conn:
            length = conn.execute("SELECT (pg_stat_file(%s)).size", (str(self.path),)).fetchone()[0] - self.offset
            if length <= 0:
                return b""
            return conn.execute(
                "SELECT pg_read_binary_file(%s, %s, %s)", (str(self.path), self.offset, length)
            ).fetchone()[0]

    def count(self) -> int | None:
        if self.path is None:
            return None
        raw = self._read()
        self.offset += len(raw)
        text = raw.decode("utf-8", "replace")
        marker = f"@{self.database} "
        return sum(1 for line in text.splitlines() if marker in line and ("statement: " in line or " execute " in line))


async def count_agentsite_statements(server: Server, api_key: str, admin_url: str, turns: int) -> dict[str, float]:
    conn = await Connection(HOST, server.port, api_key).open()
    await chat(conn, "count-warm")
    out = {}
    with StatementLog(admin_url, server.database.name) as log:
        log.count()
        for i in range(turns):
            await chat(conn, f"count-fresh-{i}")
        await asyncio.sleep(0.3)
        fresh = log.count()
        for _ in range(turns):
            await chat(conn, "count-same")
        await asyncio.sleep(0.3)
        same = log.count()
    await conn.close()
    if fresh is not None:
        out["fresh.statements"] = fresh / turns
        out["same.statements"] = same / turns
    return out


def count_floor_statements(admin_url: str, database: str, turns: int) -> dict[str, float]:
    url = admin_url.rsplit("/", 1)[0] + "/" + database
    out = {}
    with StatementLog(admin_url, database) as log:
        for scenario in ("fresh", "same"):
            log.count()
            subprocess.run(
                [sys.executable, "-m", "bench.floor", "--db", url, "--scenario", scenario, "--turns", str(turns)],
                cwd=ROOT,
                env=base_env("sqlite:////tmp/agentsite-floor-unused.sqlite3"),
                capture_output=True,
                check=True,
            )
            time.sleep(0.3)
            counted = log.count()
            # The floor warms up with 10 turns (fresh threads) and sets its tables up first.
            if counted is not None:
                out[f"{scenario}.statements"] = counted / (turns + 10)
    return out


def bytes_per_turn(database: Database, key: str, window: int = 20) -> dict[str, float]:
    """Bytes the first and the last `window` committed turns of a session
    wrote to the turn and event tables (PostgreSQL's pg_column_size)."""
    rows = database.query(
        "SELECT pg_column_size(t.*) + coalesce((SELECT sum(pg_column_size(e.*)) FROM agent_turn_events e "
        "WHERE e.turn_id = t.id), 0) FROM agent_turns t JOIN agent_sessions s ON s.id = t.session_id "
        "WHERE s.key = %s ORDER BY t.number",
        (key,),
    )
    sizes = [r[0] for r in rows]
    if len(sizes) < 2 * window:
        return {}
    return {
        "same.bytes_first20": statistics.mean(sizes[:window]),
        "same.bytes_last20": statistics.mean(sizes[-window:]),
    }


# --- the table ------------------------------------------------------------------------------------

ROWS = [
    # (metric, label, target as (ratio bound, direction) or None)
    ("fresh.p50_ms", "fresh sessions: p50 ms", ("<=", 2.0)),
    ("fresh.p95_ms", "fresh sessions: p95 ms", None),
    ("fresh.turns_per_s", "fresh sessions: turns/s", None),
    ("fresh.cpu_ms", "fresh sessions: CPU ms per turn", ("<=", 2.0)),
    ("fresh.statements", "fresh sessions: SQL statements per turn", None),
    ("same.p50_ms", "one session: p50 ms", None),
    ("same.cpu_ms", "one session: CPU ms per turn", None),
    ("same.statements", "one session: SQL statements per turn", None),
    ("same.last20_over_first20", "one session: last 20 ÷ first 20 (p50)", None),
    ("same.bytes_first20", "one session: bytes written per turn, first 20", None),
    ("same.bytes_last20", "one session: bytes written per turn, last 20", None),
    ("concurrent.turns_per_s", "20 clients × 20 turns: turns/s", (">=", 0.7)),
    ("concurrent.cpu_ms", "20 clients × 20 turns: CPU ms per turn", None),
    ("two_processes.turns_per_s", "two daphne processes, 20 × 20: turns/s", (">=", 1.2)),
    ("contention.p50_ms", "5 clients, one session: p50 ms", None),
    ("contention.p99_ms", "5 clients, one session: p99 ms", None),
    ("contention.committed", "5 clients, one session: committed", None),
    ("contention.refused", "5 clients, one session: refused", None),
    ("contention.lost", "5 clients, one session: lost", None),
    ("sse.first_delta_ms", "SSE: first delta ms", ("<=", 2.0)),
    ("sse.done_ms", "SSE: done ms", None),
]


def median_of(results: list[Result]) -> dict[str, float]:
    keys = {k for r in results for k in r.values}
    return {k: statistics.median(r.values[k] for r in results if k in r.values) for k in keys}


def checks(pg: dict[str, float], floor: dict[str, float], sizes: Sizes) -> list[tuple[str, bool, str]]:
    out = []
    for metric, label, target in ROWS:
        if target is None or metric not in pg:
            continue
        base = floor.get("concurrent.turns_per_s") if metric == "two_processes.turns_per_s" else floor.get(metric)
        if not base:
            continue
        ratio = pg[metric] / base
        op, bound = target
        out.append((f"{label}: {ratio:.2f}× floor {op} {bound}", ratio <= bound if op == "<=" else ratio >= bound, ""))
    if "contention.p99_ms" in pg:
        ratio = pg["contention.p99_ms"] / pg["contention.p50_ms"]
        out.append((f"one session, 5 clients: p99 {ratio:.2f}× p50 <= 4", ratio <= 4, ""))
        out.append(
            (
                "one session, 5 clients: all committed, none lost",
                pg["contention.lost"] == 0 and pg["contention.refused"] == 0,
                "",
            )
        )
    if "same.last20_over_first20" in pg:
        out.append(
            (
                f"one session: last 20 {pg['same.last20_over_first20']:.2f}× first 20 <= 1.2",
                pg["same.last20_over_first20"] <= 1.2,
                "",
            )
        )
    if "fresh.statements" in pg:
        out.append((f"statements per turn {pg['fresh.statements']:.1f} <= 15", pg["fresh.statements"] <= 15, ""))
    if "same.bytes_last20" in pg:
        grew = pg["same.bytes_last20"] / pg["same.bytes_first20"]
        out.append(
            (f"bytes written per turn, last 20 ÷ first 20: {grew:.2f} (independent of length: <= 1.1)", grew <= 1.1, "")
        )
    return out


def render(columns: dict[str, dict[str, float]]) -> str:
    names = list(columns)
    head = "| metric | " + " | ".join(names) + " | " + " | ".join(f"{n} ÷ floor" for n in names if n != "floor") + " |"
    lines = [head, "|" + "---|" * (1 + len(names) + len(names) - 1)]
    for metric, label, _ in ROWS:
        if not any(metric in c for c in columns.values()):
            continue
        cells = [f"{columns[n][metric]:.2f}" if metric in columns[n] else "–" for n in names]
        base_key = "concurrent.turns_per_s" if metric == "two_processes.turns_per_s" else metric
        ratios = []
        for n in names:
            if n == "floor":
                continue
            base = columns.get("floor", {}).get(base_key)
            ratios.append(f"{columns[n][metric] / base:.2f}" if metric in columns[n] and base else "–")
        lines.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


# --- main ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few turns of everything")
    parser.add_argument(
        "--pg",
        default=os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL database to connect to for creating the benchmark's own",
    )
    parser.add_argument("--targets", default="postgresql,sqlite")
    parser.add_argument("--json", default=str(ROOT / "artifacts" / "bench.json"))
    args = parser.parse_args()
    sizes = SMOKE if args.smoke else Sizes()
    targets = args.targets.split(",")
    logs = Path(tempfile.mkdtemp(prefix="agentsite-bench-logs-"))
    suffix = uuid.uuid4().hex[:6]
    floor_db = f"agentsite_bench_floor_{suffix}"
    with psycopg.connect(args.pg, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{floor_db}"')
    databases: dict[str, Database] = {}
    servers: dict[str, list[Server]] = {}
    results: dict[str, list[Result]] = {"floor": []}
    agentsites: dict[str, Agentsite] = {}
    floor: FloorWorker | None = None
    columns: dict[str, dict[str, float]] = {}
    failures: list[str] = []
    print(f"agentsite bench on {platform.node()} ({os.cpu_count()} CPUs), Python {platform.python_version()}")
    try:
        for target in targets:
            database = (
                Database.postgres(args.pg, f"agentsite_bench_{suffix}") if target == "postgresql" else Database.sqlite()
            )
            databases[target] = database
            env = base_env(database.url)
            manage(env, "migrate", "--noinput", "-v", "0")
            api_key = manage(env, "create_api_key", "bench").splitlines()[-1]
            servers[target] = [Server(database, logs / f"{target}.log").start()]
            if target == "postgresql":
                servers[target].append(Server(database, logs / f"{target}-2.log").start())
            results[target] = []
            agentsites[target] = Agentsite(servers[target], api_key, database)
        floor = FloorWorker(args.pg, floor_db, logs / "floor.log")
        order = ["floor", *targets]
        for round_ in range(sizes.rounds):
            print(f"round {round_ + 1}/{sizes.rounds}, load {loadavg()}", flush=True)
            rotated = order[round_ % len(order) :] + order[: round_ % len(order)]
            try:
                round_results = asyncio.run(one_round(rotated, agentsites, floor, sizes, round_))
            except SERVER_FAILURES as exc:
                failures.append(server_failure(f"round {round_ + 1}", exc, servers))
                if not all_alive(servers):
                    break
                continue
            for side, result in round_results.items():
                if sizes.same >= 40 and side == "postgresql":
                    result.values.update(bytes_per_turn(databases[side], f"same-{agentsites[side].tag}"))
                results[side].append(result)
        columns = {side: median_of(r) for side, r in results.items()}
        if "postgresql" in servers and all_alive(servers):
            try:
                columns["postgresql"].update(
                    asyncio.run(
                        count_agentsite_statements(
                            servers["postgresql"][0], agentsites["postgresql"].api_key, args.pg, sizes.count
                        )
                    )
                )
            except SERVER_FAILURES as exc:
                failures.append(server_failure("counting statements", exc, servers))
            columns["floor"].update(count_floor_statements(args.pg, floor_db, sizes.count))
    finally:
        if floor is not None:
            floor.stop()
        for group in servers.values():
            for server in group:
                server.stop()
        for database in databases.values():
            database.drop()
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{floor_db}" WITH (FORCE)')
    print(f"load after: {loadavg()}")
    print(render(columns))
    verdicts = checks(columns.get("postgresql", {}), columns.get("floor", {}), sizes)
    for text, ok, _ in verdicts:
        print(f"  {'PASS' if ok else 'MISS'}  {text}")
    for failure in failures:
        print(f"  FAIL  {failure}")
    Path(args.json).parent.mkdir(exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "columns": columns,
                "checks": [{"check": t, "ok": ok} for t, ok, _ in verdicts],
                "rounds": sizes.rounds,
                "smoke": args.smoke,
                "host": platform.node(),
                "load_after": loadavg(),
                "server_errors": failures,
            },
            indent=2,
        )
    )
    print(f"(written to {args.json})")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
