"""The floor: bare LangGraph, in-process, no HTTP, no turn protocol — the
benchmark's graph (bench.graphs) with the same offline model, `ainvoke` on an
`AsyncPostgresSaver` over a psycopg pool, as a LangGraph app with no service
around it would run. Run in a process of its own, so its CPU is its own:

    python -m bench.floor --db postgres://… --scenario fresh --turns 200

prints one JSON object of results; `--serve` takes scenario after scenario
on stdin (bench.run keeps one such process for the whole run)."""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
import uuid
from typing import Any

from langchain_core.messages import HumanMessage

TEXT = "Hello! I would like to book a table for four people next Friday evening."


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def open_graph(db: str):
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import AsyncConnectionPool

    from bench.graphs import build_chat_graph
    from graphs.intake.offline import OfflineChatModel

    pool = AsyncConnectionPool(
        db,
        min_size=1,
        max_size=5,
        connection_class=AsyncConnection[DictRow],
        kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": None},
        open=False,
    )
    await pool.open(wait=True)
    saver = AsyncPostgresSaver(pool)
    await saver.setup()
    return pool, build_chat_graph(model=OfflineChatModel(), checkpointer=saver)


async def turn(graph, thread: str) -> float:
    started = time.perf_counter()
    await graph.ainvoke({"messages": [HumanMessage(TEXT)]}, {"configurable": {"thread_id": thread}})
    return time.perf_counter() - started


async def first_token(graph, thread: str) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    async for _chunk, _meta in graph.astream(
        {"messages": [HumanMessage(TEXT)]}, {"configurable": {"thread_id": thread}}, stream_mode="messages"
    ):
        if first is None:
            first = time.perf_counter() - started
    return first, time.perf_counter() - started


async def scenario(graph, name: str, turns: int, clients: int) -> dict[str, Any]:
    """One scenario on an open graph: latencies, wall and CPU seconds (this
    process's)."""
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    out: dict[str, Any] = {}
    if name == "fresh":
        latencies = [await turn(graph, str(uuid.uuid4())) for _ in range(turns)]
    elif name == "same":
        thread = str(uuid.uuid4())
        latencies = [await turn(graph, thread) for _ in range(turns)]
    elif name == "concurrent":

        async def client() -> list[float]:
            return [await turn(graph, str(uuid.uuid4())) for _ in range(turns)]

        latencies = [x for batch in await asyncio.gather(*(client() for _ in range(clients))) for x in batch]
    elif name == "contention":
        # Bare LangGraph has no turn protocol: concurrent runs on one
        # thread overwrite each other's messages.
        thread = str(uuid.uuid4())

        async def client() -> list[float]:
            return [await turn(graph, thread) for _ in range(turns)]

        latencies = [x for batch in await asyncio.gather(*(client() for _ in range(clients))) for x in batch]
        state = await graph.aget_state({"configurable": {"thread_id": thread}})
        kept = sum(1 for m in state.values["messages"] if m.type == "human")
        out["lost"] = clients * turns - kept
    elif name == "first_token":
        pairs = [await first_token(graph, str(uuid.uuid4())) for _ in range(turns)]
        latencies = [total for _, total in pairs]
        out["first_tokens"] = [first for first, _ in pairs]
        out["first_token_p50"] = statistics.median(out["first_tokens"])
    else:
        raise SystemExit(f"unknown scenario {name}")
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    out.update(latencies=latencies, seconds=wall, cpu_seconds=cpu, turns=len(latencies))
    return out


async def warmed_up(db: str):
    pool, graph = await open_graph(db)
    for _ in range(10):  # fresh threads, the pool's connections
        await turn(graph, str(uuid.uuid4()))
    return pool, graph


async def run(db: str, name: str, turns: int, clients: int) -> dict[str, Any]:
    pool, graph = await warmed_up(db)
    try:
        return await scenario(graph, name, turns, clients)
    finally:
        await pool.close()


async def serve(db: str) -> None:
    """One JSON command per line on stdin ({"scenario", "turns", "clients"}),
    one JSON result per line on stdout, on one warm graph:
    bench.run interleaves the floor's scenarios with agentsite's, piece by
    piece, so both see the machine as it is at that moment."""
    pool, graph = await warmed_up(db)
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command = json.loads(line)
            out = await scenario(graph, command["scenario"], command["turns"], command.get("clients", 1))
            print(json.dumps(out), flush=True)
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--scenario")
    parser.add_argument("--serve", action="store_true", help="take scenarios as JSON lines on stdin")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--clients", type=int, default=1)
    args = parser.parse_args()
    import django

    django.setup()  # the offline model reads settings (token delay)
    if args.serve:
        asyncio.run(serve(args.db))
    elif args.scenario:
        print(json.dumps(asyncio.run(run(args.db, args.scenario, args.turns, args.clients))))
    else:
        parser.error("--scenario or --serve")


if __name__ == "__main__":
    main()
