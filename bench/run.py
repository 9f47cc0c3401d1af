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

With `--peers` (bench.peers, bench.sdk, bench.compare) a second table puts
agentsite's `/langgraph/` beside langgraph-api and Aegra, all through the
LangGraph SDK; `--profile` adds a py-spy flame graph of agentsite.
The pieces: bench.servers (agentsite's processes and databases),
bench.scenarios (the `/api/` rounds), bench.statements, bench.table.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from bench import compare, peers, report
from bench.client import ServerError
from bench.scenarios import SMOKE, Agentsite, FloorWorker, Result, Sizes, one_round
from bench.sdk import PEER_SIZES, SDK_SMOKE, SdkSizes, Target, sdk_round
from bench.servers import HOST, ROOT, Database, Server, base_env, loadavg, manage
from bench.statements import bytes_per_turn, count_agentsite_statements, count_floor_statements
from bench.table import checks, median_of

# A round the server failed (an error status, a connection it dropped
# unanswered, a broken answer): reported with the servers' last words, and
# the bench goes on to its table. A keep-alive connection the server closed
# while idle is no failure: bench.client reopens it.
SERVER_FAILURES = (ServerError, AssertionError, ConnectionError, asyncio.IncompleteReadError, ValueError)


def all_alive(servers: dict[str, list[Server]]) -> bool:
    return all(s.process is not None and s.process.poll() is None for group in servers.values() for s in group)


class Stopped(Exception):
    """The bench was told to stop (SIGTERM, SIGHUP): its servers are still
    stopped, by the `finally` that a plain SIGTERM would skip."""


def stop_on_signal(signum: int, _frame: object) -> None:
    raise Stopped(f"stopped by signal {signum}")


def server_failure(where: str, exc: BaseException, servers: dict[str, list[Server]]) -> str:
    print(f"{where}: server error: {type(exc).__name__}: {str(exc)[:500]}", file=sys.stderr, flush=True)
    for group in servers.values():
        for server in group:
            state = "running" if server.process and server.process.poll() is None else "exited"
            tail = server.log.read_text(errors="replace")[-2000:] if server.log.exists() else ""
            print(f"--- {server.log} ({state}), last lines:\n{tail}", file=sys.stderr, flush=True)
    return f"{where}: server error: {type(exc).__name__}: {str(exc)[:200]}"


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
    parser.add_argument(
        "--peers",
        default=None,
        help="none | lgapi | aegra | all (default: all, none with --smoke): the servers "
        "agentsite's /langgraph/ is compared with, through the LangGraph SDK",
    )
    parser.add_argument(
        "--profile",
        nargs="?",
        const=str(ROOT / "artifacts" / "bench-profile.svg"),
        help="a py-spy flame graph (SVG; default artifacts/bench-profile.svg) of agentsite under the SDK's 20 × 20",
    )
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3; the smoke pass runs 1)")
    args = parser.parse_args()
    sizes = SMOKE if args.smoke else Sizes()
    if args.rounds:
        sizes = dataclasses.replace(sizes, rounds=args.rounds)
    sdk_sizes = SDK_SMOKE if args.smoke else SdkSizes()
    peer_sizes = SDK_SMOKE if args.smoke else PEER_SIZES

    def sizes_of(target: Target) -> SdkSizes:
        return sdk_sizes if target.name == compare.AGENTSITE else peer_sizes

    peer_names = peers.parse_peers(args.peers or ("none" if args.smoke else "all"))
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
    running_peers: list[peers.Peer] = []
    sdk_targets: list[compare.Target] = []
    sdk_results: dict[str, list[dict[str, float]]] = {}
    profiled = ""
    # Wall seconds each server's scenarios took (where a run's minutes go).
    spent: dict[str, dict[str, float]] = {}
    load_before = loadavg()
    print(f"agentsite bench on {platform.node()} ({os.cpu_count()} CPUs), Python {platform.python_version()}")
    print(f"load at start: {load_before}", flush=True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop_on_signal)
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
        if targets:
            first = servers[targets[0]][0]
            sdk_targets.append(
                compare.agentsite_target(
                    f"http://{HOST}:{first.port}",
                    agentsites[targets[0]].api_key,
                    first.process.pid,
                    args.pg,
                    first.database.name,
                )
            )
        for name in peer_names:
            running_peers.append(peers.bring_up(name, args.pg, suffix, logs))
            sdk_targets.append(compare.peer_target(running_peers[-1]))
        order = ["floor", *targets]
        for round_ in range(sizes.rounds):
            print(f"round {round_ + 1}/{sizes.rounds}, load {loadavg()}", flush=True)
            rotated = order[round_ % len(order) :] + order[: round_ % len(order)]
            started = time.perf_counter()
            try:
                round_results = asyncio.run(one_round(rotated, agentsites, floor, sizes, round_))
            except SERVER_FAILURES as exc:
                failures.append(server_failure(f"round {round_ + 1}", exc, servers))
                if not all_alive(servers):
                    break
                continue
            finally:
                api_seconds = spent.setdefault("/api/ and the floor", {})
                api_seconds["rounds"] = api_seconds.get("rounds", 0.0) + time.perf_counter() - started
            for side, result in round_results.items():
                if sizes.same >= 40 and side == "postgresql":
                    result.values.update(bytes_per_turn(databases[side], f"same-{agentsites[side].tag}"))
                results[side].append(result)
            # The LangGraph servers through the SDK, taking turns piece by piece.
            turn = round_ % max(len(sdk_targets), 1)
            rotated_targets = sdk_targets[turn:] + sdk_targets[:turn]
            sdk_out = asyncio.run(sdk_round(rotated_targets, sizes_of, not sdk_results, spent))
            for name, values in sdk_out.items():
                sdk_results.setdefault(name, []).append(values)
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
        if args.profile and sdk_targets and sdk_targets[0].name == compare.AGENTSITE and not sdk_targets[0].failure:
            pid = servers[targets[0]][0].process.pid
            profiled = compare.profile(sdk_targets[0], pid, sdk_sizes, Path(args.profile), logs)
    except (Stopped, KeyboardInterrupt) as exc:
        failures.append(f"the bench was stopped ({exc or 'interrupted'}): the figures are partial")
    finally:
        for peer in running_peers:
            peer.stop()
        if floor is not None:
            floor.stop()
        for group in servers.values():
            for server in group:
                server.stop()
        for database in databases.values():
            database.drop()
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{floor_db}" WITH (FORCE)')
    load_after = loadavg()
    sdk_columns = compare.median_columns(sdk_results)
    print(report.render(columns, sdk_columns, sdk_targets))
    verdicts = checks(columns.get("postgresql", {}), columns.get("floor", {}), sizes)
    sdk_verdicts = compare.checks(sdk_columns, sdk_targets)
    for text, ok, _ in verdicts:
        print(f"  {'PASS' if ok else 'MISS'}  /api/ {text}")
    for text, ok in sdk_verdicts:
        print(f"  {'PASS' if ok else 'MISS'}  {text}")
    print(f"load at start: {load_before}; at end: {load_after} (1, 5, 15 min; {os.cpu_count()} CPUs)")
    labels = {t.name: t.label for t in sdk_targets}
    for name, scenarios in spent.items():
        where = ", ".join(f"{scenario} {seconds:.0f} s" for scenario, seconds in scenarios.items())
        print(f"time: {labels.get(name, name)}: {sum(scenarios.values()) / 60:.1f} min ({where})")
    if profiled:
        print(profiled)
    ours = next((t for t in sdk_targets if t.name == compare.AGENTSITE), None)
    if ours is not None and ours.failure:
        failures.append(f"/langgraph/ through the SDK: {ours.failure}")
    for failure in failures:
        print(f"  FAIL  {failure}")
    Path(args.json).parent.mkdir(exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "columns": columns,
                "checks": [{"check": t, "ok": ok} for t, ok, _ in verdicts],
                "sdk": {
                    "columns": sdk_columns,
                    "servers": {t.name: t.failure or "running" for t in sdk_targets},
                    "checks": [{"check": t, "ok": ok} for t, ok in sdk_verdicts],
                },
                "rounds": sizes.rounds,
                "smoke": args.smoke,
                "host": platform.node(),
                "load_before": load_before,
                "load_after": load_after,
                "seconds": spent,
                "server_errors": failures,
            },
            indent=2,
        )
    )
    print(f"(written to {args.json})")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
