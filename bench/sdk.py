"""The scenarios every LangGraph server gets in `make bench`, through
LangGraph's Python SDK (`langgraph_sdk.get_client`), the same client code for
agentsite's `/langgraph/` and for the peers (bench.peers):

* new thread + `runs.wait` (the chat graph);
* new thread + `runs.stream` with `values` + `messages-tuple`: first
  message token, and the stream's end;
* 20 clients × 20 runs, each client on a thread of its own;
* 5 clients × 20 runs on one thread (`multitask_strategy="enqueue"`),
  then counted from the server's own thread state: each run's input carries
  a marker, so a run acknowledged but missing is lost, one present twice
  duplicated;
* new thread + a 5-step tool run (bench.graphs' tool graph);
* 200 runs on one thread: last 20 ÷ first 20 (p50).

A round runs every scenario with the servers taking turns piece by piece
(as bench.run does for `/api/`). CPU comes from each `Target`'s counters:
the server's processes, and where the server has them, its Redis and its
PostgreSQL backends, each on its own row. A server that fails a request is
marked failed with the reason and left out of the rest of the run."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langgraph_sdk import get_client

TEXT = "Hello! I would like to book a table for four people next Friday evening."
TIMEOUT_SECONDS = 120.0


@dataclass
class SdkSizes:
    wait: int = 100
    stream: int = 50
    clients: int = 20
    per_client: int = 20
    batches: int = 3
    contention_clients: int = 5
    contention_runs: int = 20
    tools: int = 50
    same: int = 200
    piece: int = 25  # new-thread runs between two turns of the servers
    stream_piece: int = 10


SDK_SMOKE = SdkSizes(
    wait=4, stream=3, clients=3, per_client=2, batches=1, contention_clients=2, contention_runs=3, tools=2, same=40
)


@dataclass
class Target:
    """One LangGraph server as the SDK sees it."""

    name: str
    label: str
    url: str
    api_key: str | None = None
    counters: Callable[[], dict[str, float]] = dict
    failure: str = ""
    client: Any = None
    assistants: dict[str, str] = field(default_factory=dict)

    async def open(self) -> None:
        self.client = get_client(url=self.url, api_key=self.api_key, timeout=TIMEOUT_SECONDS)
        for graph in ("chat", "tools"):
            # The same lookup for every server: its assistant for the graph.
            found = await self.client.assistants.search(graph_id=graph, limit=10)
            ids = [a["assistant_id"] for a in found if a.get("graph_id") == graph]
            self.assistants[graph] = ids[0] if ids else graph

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def replied(result: Any) -> bool:
    messages = result.get("messages", []) if isinstance(result, dict) else []
    return bool(messages) and messages[-1].get("type") in ("ai", "AIMessage")


async def new_thread_wait(t: Target, graph: str = "chat") -> float:
    started = time.perf_counter()
    thread = await t.client.threads.create()
    result = await t.client.runs.wait(thread["thread_id"], t.assistants[graph], input=human(TEXT))
    seconds = time.perf_counter() - started
    assert replied(result), f"runs.wait answered {str(result)[:200]}"
    return seconds


async def new_thread_stream(t: Target) -> tuple[float, float]:
    thread = await t.client.threads.create()
    started, first = time.perf_counter(), None
    async for part in t.client.runs.stream(
        thread["thread_id"], t.assistants["chat"], input=human(TEXT), stream_mode=["values", "messages-tuple"]
    ):
        assert part.event != "error", part.data
        if first is None and part.event.startswith("messages"):
            first = time.perf_counter() - started
    end = time.perf_counter() - started
    assert first is not None, "the stream carried no message token"
    return first, end


async def many(t: Target, sizes: SdkSizes) -> tuple[list[float], float]:
    latencies: list[float] = []

    async def one_client() -> None:
        thread = await t.client.threads.create()
        for _ in range(sizes.per_client):
            started = time.perf_counter()
            result = await t.client.runs.wait(thread["thread_id"], t.assistants["chat"], input=human(TEXT))
            assert replied(result), f"runs.wait answered {str(result)[:200]}"
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(sizes.clients)))
    return latencies, time.perf_counter() - started


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, list):
        return " ".join(str(block.get("text", "")) if isinstance(block, dict) else str(block) for block in content)
    return str(content)


async def contention(t: Target, sizes: SdkSizes) -> dict[str, float]:
    thread = (await t.client.threads.create())["thread_id"]
    acknowledged: list[str] = []
    latencies: list[float] = []
    refused = 0

    async def one_client(n: int) -> None:
        nonlocal refused
        for i in range(sizes.contention_runs):
            marker = f"[run {n}-{i} {uuid.uuid4().hex[:6]}]"
            started = time.perf_counter()
            try:
                await t.client.runs.wait(
                    thread, t.assistants["chat"], input=human(f"{TEXT} {marker}"), multitask_strategy="enqueue"
                )
            except Exception:  # counted: the server refused or failed this run
                refused += 1
                continue
            latencies.append(time.perf_counter() - started)
            acknowledged.append(marker)

    await asyncio.gather(*(one_client(n) for n in range(sizes.contention_clients)))
    state = await t.client.threads.get_state(thread)
    texts = [text_of(m) for m in (state.get("values") or {}).get("messages", []) if m.get("type") == "human"]
    seen = {marker: sum(marker in text for text in texts) for marker in acknowledged}
    return {
        "contention.runs": sizes.contention_clients * sizes.contention_runs,
        "contention.committed": sum(1 for n in seen.values() if n),
        "contention.lost": sum(1 for n in seen.values() if n == 0),
        "contention.duplicated": sum(1 for n in seen.values() if n > 1),
        "contention.refused": refused,
        "contention.p50_ms": 1000 * statistics.median(latencies) if latencies else 0.0,
    }


async def same_thread(t: Target, runs: int) -> list[float]:
    thread = (await t.client.threads.create())["thread_id"]
    latencies = []
    for _ in range(runs):
        started = time.perf_counter()
        result = await t.client.runs.wait(thread, t.assistants["chat"], input=human(TEXT))
        assert replied(result), f"runs.wait answered {str(result)[:200]}"
        latencies.append(time.perf_counter() - started)
    return latencies


@dataclass
class Tally:
    """One target's samples of one scenario in one round."""

    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    rates: list[float] = field(default_factory=list)

    def into(self, out: dict[str, float], prefix: str) -> None:
        if not self.latencies:
            return
        ordered = sorted(self.latencies)
        out[f"{prefix}.p50_ms"] = 1000 * statistics.median(ordered)
        out[f"{prefix}.p95_ms"] = 1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        if self.rates:
            out[f"{prefix}.runs_per_s"] = statistics.median(self.rates)
        for part, seconds in self.cpu.items():
            key = f"{prefix}.cpu_ms" if part == "server" else f"{prefix}.{part}_cpu_ms"
            out[key] = 1000 * seconds / len(ordered)


async def measured(t: Target, tally: Tally, work: Callable[[], Awaitable[list[float]]]) -> None:
    before, started = t.counters(), time.perf_counter()
    latencies = await work()
    seconds, after = time.perf_counter() - started, t.counters()
    tally.latencies += latencies
    tally.seconds += seconds
    tally.rates.append(len(latencies) / seconds)
    for part in after:
        tally.cpu[part] = tally.cpu.get(part, 0.0) + after[part] - before.get(part, 0.0)


def chunks(total: int, size: int) -> list[int]:
    return [min(size, total - start) for start in range(0, total, size)]


async def sdk_round(targets: list[Target], sizes: SdkSizes) -> dict[str, dict[str, float]]:
    """Every scenario, the targets taking turns piece by piece; a target
    that fails is marked so (`failure`) and skipped from then on."""
    live = [t for t in targets if not t.failure]
    out: dict[str, dict[str, float]] = {t.name: {} for t in live}
    tallies: dict[tuple[str, str], Tally] = {}

    async def turn(t: Target, scenario: str, run: Callable[[], Awaitable[Any]]) -> None:
        if t.failure:
            return
        try:
            await run()
        except Exception as exc:  # a server's failure, shown in its column
            t.failure = f"{scenario}: {type(exc).__name__}: {str(exc)[:160]}"

    def tally(t: Target, scenario: str) -> Tally:
        return tallies.setdefault((t.name, scenario), Tally())

    for t in live:
        await turn(t, "connect", t.open)

    async def waits(t: Target, n: int, graph: str, scenario: str) -> None:
        async def work() -> list[float]:
            return [await new_thread_wait(t, graph) for _ in range(n)]

        await measured(t, tally(t, scenario), work)

    async def streams(t: Target, n: int) -> None:
        for _ in range(n):
            first, end = await new_thread_stream(t)
            tally(t, "stream.first").latencies.append(first)
            tally(t, "stream.end").latencies.append(end)

    async def batch(t: Target) -> None:
        async def work() -> list[float]:
            latencies, _ = await many(t, sizes)
            return latencies

        await measured(t, tally(t, "many"), work)

    async def contended(t: Target) -> None:
        out[t.name].update(await contention(t, sizes))

    async def same(t: Target) -> None:
        latencies = await same_thread(t, sizes.same)
        out[t.name]["same.p50_ms"] = 1000 * statistics.median(latencies)
        if len(latencies) >= 40:
            ratio = statistics.median(latencies[-20:]) / statistics.median(latencies[:20])
            out[t.name]["same.last20_over_first20"] = ratio

    for n in chunks(sizes.wait, sizes.piece):
        for t in live:
            await turn(t, "runs.wait", partial(waits, t, n, "chat", "wait"))
    for n in chunks(sizes.stream, sizes.stream_piece):
        for t in live:
            await turn(t, "runs.stream", partial(streams, t, n))
    for _ in range(sizes.batches):
        for t in live:
            await turn(t, "20 × 20", partial(batch, t))
    for t in live:
        await turn(t, "one thread, enqueue", partial(contended, t))
    for n in chunks(sizes.tools, sizes.stream_piece):
        for t in live:
            await turn(t, "tool run", partial(waits, t, n, "tools", "tools"))
    for t in live:
        await turn(t, "200 runs, one thread", partial(same, t))
    for t in live:
        await t.close()
    for (name, scenario), samples in tallies.items():
        samples.into(out[name], scenario)
    return {t.name: out[t.name] for t in live if not t.failure}
