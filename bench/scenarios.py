"""The `/api/` scenarios of one round (bench.run): agentsite's servers and
the floor taking turns piece by piece, and the figures each side gets."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.client import Connection
from bench.servers import ROOT, TEXT, Database, Server, base_env, chat, connections


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
        result.values["contention.runs"] = len(outcomes)
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
            results[side].values["contention.runs"] = sizes.contention_turns * sizes.contention_clients
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
