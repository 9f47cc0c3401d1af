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
    """Samples of one server in one round. The peers answer a lone run
    after a poll (bench.peers), so their figures settle with fewer samples
    than agentsite's and a round of theirs is mostly waiting: they get
    `PEER_SIZES`, every piece split into as many parts as agentsite's, so
    the servers still take turns through every scenario."""

    wait: int = 100
    stream: int = 50
    clients: int = 20
    per_client: int = 20
    batches: int = 3
    contention_clients: int = 5
    contention_runs: int = 20
    tools: int = 50
    same: int = 200
    # The two one-thread scenarios in every round (False: the first only;
    # their figures are counts and a ratio within the run, not a rate the
    # machine's load moves from round to round).
    every_round: bool = True
    piece: int = 25  # new-thread runs between two turns of the servers
    stream_piece: int = 10


# 20 × 20 stays 20 clients × 20 runs (the target is set on that load).
PEER_SIZES = SdkSizes(wait=20, stream=20, batches=1, tools=10, every_round=False)

SDK_SMOKE = SdkSizes(
    wait=4, stream=3, clients=3, per_client=2, batches=1, contention_clients=2, contention_runs=3, tools=2, same=40
)

# The runs of the one-thread scenario timed at each end of the thread.
WINDOW = 20


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


async def same_thread(t: Target, runs: int) -> tuple[list[float], int]:
    """`runs` runs on one thread: the first and the last `WINDOW` timed one
    by one (`runs.wait`), the ones between sent with `runs.create` a
    window at a time (`enqueue`, then `runs.join` on the window's last),
    so a peer's poll is not waited on 160 times for runs that are not
    timed. Every run is a real run on the thread; returns the timed
    latencies (first window, then last) and the human messages the thread
    holds at the end (`runs` if none was lost)."""
    thread = (await t.client.threads.create())["thread_id"]
    window = min(WINDOW, runs // 2)

    async def timed() -> float:
        started = time.perf_counter()
        result = await t.client.runs.wait(thread, t.assistants["chat"], input=human(TEXT), multitask_strategy="enqueue")
        assert replied(result), f"runs.wait answered {str(result)[:200]}"
        return time.perf_counter() - started

    latencies = [await timed() for _ in range(window)]
    for n in chunks(runs - 2 * window, window):
        created = [
            await t.client.runs.create(thread, t.assistants["chat"], input=human(TEXT), multitask_strategy="enqueue")
            for _ in range(n)
        ]
        await t.client.runs.join(thread, created[-1]["run_id"])
    latencies += [await timed() for _ in range(window)]
    state = await t.client.threads.get_state(thread)
    humans = sum(1 for m in (state.get("values") or {}).get("messages", []) if m.get("type") == "human")
    return latencies, humans


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
        if self.cpu:
            # What the whole server took, whatever its parts: comparable
            # between a server with a database and one that keeps runs in memory.
            out[f"{prefix}.all_cpu_ms"] = 1000 * sum(self.cpu.values()) / len(ordered)


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


def split(total: int, parts: int) -> list[int]:
    """`total` in `parts` nearly equal parts (some 0 when total < parts)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


Sizes = Callable[[Target], SdkSizes]


async def sdk_round(
    targets: list[Target], sizes_of: Sizes, first_round: bool = True, spent: dict[str, dict[str, float]] | None = None
) -> dict[str, dict[str, float]]:
    """Every scenario, the targets taking turns piece by piece, each with
    its own sizes (`sizes_of`); the one-thread scenarios of a target whose
    sizes are not `every_round` only in the first round. A target that
    fails is marked so (`failure`) and skipped from then on. `spent`
    gathers the wall seconds of each target's scenarios."""
    live = [t for t in targets if not t.failure]
    out: dict[str, dict[str, float]] = {t.name: {} for t in live}
    tallies: dict[tuple[str, str], Tally] = {}
    spent = {} if spent is None else spent

    async def turn(t: Target, scenario: str, run: Callable[[], Awaitable[Any]]) -> None:
        if t.failure:
            return
        started = time.perf_counter()
        try:
            await run()
        except Exception as exc:  # a server's failure, shown in its column
            t.failure = f"{scenario}: {type(exc).__name__}: {str(exc)[:160]}"
        finally:
            seconds = spent.setdefault(t.name, {})
            seconds[scenario] = seconds.get(scenario, 0.0) + time.perf_counter() - started

    def tally(t: Target, scenario: str) -> Tally:
        return tallies.setdefault((t.name, scenario), Tally())

    for t in live:
        await turn(t, "connect", t.open)

    async def waits(t: Target, n: int, graph: str, scenario: str) -> None:
        async def work() -> list[float]:
            return [await new_thread_wait(t, graph) for _ in range(n)]

        if n:
            await measured(t, tally(t, scenario), work)

    async def streams(t: Target, n: int) -> None:
        for _ in range(n):
            first, end = await new_thread_stream(t)
            tally(t, "stream.first").latencies.append(first)
            tally(t, "stream.end").latencies.append(end)

    async def batch(t: Target) -> None:
        async def work() -> list[float]:
            latencies, _ = await many(t, sizes_of(t))
            return latencies

        await measured(t, tally(t, "many"), work)

    async def contended(t: Target) -> None:
        out[t.name].update(await contention(t, sizes_of(t)))

    async def same(t: Target) -> None:
        latencies, humans = await same_thread(t, sizes_of(t).same)
        out[t.name]["same.p50_ms"] = 1000 * statistics.median(latencies)
        out[t.name]["same.runs_kept"] = humans
        if len(latencies) >= 2 * WINDOW:
            ratio = statistics.median(latencies[-WINDOW:]) / statistics.median(latencies[:WINDOW])
            out[t.name]["same.last20_over_first20"] = ratio

    def parts(total: Callable[[SdkSizes], int], piece: int) -> dict[str, list[int]]:
        """Each target's samples in as many pieces as the largest has."""
        count = max(len(chunks(total(sizes_of(t)), piece)) for t in live) if live else 0
        return {t.name: split(total(sizes_of(t)), count) for t in live}

    wait_parts = parts(lambda z: z.wait, sizes_of(live[0]).piece if live else 1)
    for i in range(len(next(iter(wait_parts.values()), []))):
        for t in live:
            await turn(t, "runs.wait", partial(waits, t, wait_parts[t.name][i], "chat", "wait"))
    stream_parts = parts(lambda z: z.stream, sizes_of(live[0]).stream_piece if live else 1)
    for i in range(len(next(iter(stream_parts.values()), []))):
        for t in live:
            await turn(t, "runs.stream", partial(streams, t, stream_parts[t.name][i]))
    for b in range(max((sizes_of(t).batches for t in live), default=0)):
        for t in live:
            if b < sizes_of(t).batches:
                await turn(t, "20 × 20", partial(batch, t))
    once = [t for t in live if first_round or sizes_of(t).every_round]
    for t in once:
        await turn(t, "one thread, enqueue", partial(contended, t))
    tool_parts = parts(lambda z: z.tools, sizes_of(live[0]).stream_piece if live else 1)
    for i in range(len(next(iter(tool_parts.values()), []))):
        for t in live:
            await turn(t, "tool run", partial(waits, t, tool_parts[t.name][i], "tools", "tools"))
    for t in once:
        await turn(t, "200 runs, one thread", partial(same, t))
    for t in live:
        await t.close()
    for (name, scenario), samples in tallies.items():
        samples.into(out[name], scenario)
    return {t.name: out[t.name] for t in live if not t.failure}
