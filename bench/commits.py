"""Commits side by side: the same sequential load against daphne serving
each given commit, in one run, interleaved rounds, medians.

    .venv/bin/python -m bench.commits b22b693 5162b9f HEAD   # e.g. the event log's cost

Each commit is checked out into a temporary worktree and served by this
checkout's .venv (their requirements must be installable into it), on a
fresh PostgreSQL database of its own (--pg, the admin URL), offline model
with token delay 0, DEBUG off. A round runs, per commit, N streamed turns
(time to the first delta and to `done`) and N JSON turns (turns/s, the
server's CPU per turn from /proc), each turn on a new session."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from bench.client import Connection
from bench.servers import BIN, HOST, ROOT, cpu_of, free_port, loadavg

TEXT = "Hi! My name is Ada Lovelace"


class Served:
    def __init__(self, ref: str, path: Path, admin_url: str) -> None:
        self.ref, self.path, self.admin_url = ref, path, admin_url
        self.database = f"agentsite_bench_commit_{uuid.uuid4().hex[:8]}"
        self.port = free_port()

    def start(self) -> Served:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')
        url = self.admin_url.rsplit("/", 1)[0] + f"/{self.database}"
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "DEBUG": "false",
            "SECRET_KEY": "bench-" + uuid.uuid4().hex,
            "AGENT_MODEL": "offline",
            "AGENT_OFFLINE_TOKEN_DELAY_MS": "0",
            "LOG_LEVEL": "WARNING",
            # Every turn opens a session: more rounds than the default cap
            # allows (1000 a key) would end in 429 too_many_sessions.
            "AGENT_MAX_SESSIONS_PER_OWNER": "1000000",
            "PYTHONPATH": str(self.path),
        }
        python = str(BIN / "python")
        subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=self.path, env=env, check=True)
        made = subprocess.run(
            [python, "manage.py", "create_api_key", "bench"],
            cwd=self.path,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        self.api_key = made.stdout.strip().splitlines()[-1]
        # The server's stderr for its whole life: stop() closes it.
        self.log = open(Path(tempfile.gettempdir()) / f"bench-commit-{self.port}.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(BIN / "daphne"), "-b", HOST, "-p", str(self.port), "agentsite.asgi:application"],
            cwd=self.path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                asyncio.run(asyncio.wait_for(asyncio.open_connection(HOST, self.port), 1))
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{self.ref} did not start: see {self.log.name}")

    def stop(self) -> None:
        if getattr(self, "process", None) is not None:
            self.process.terminate()
            self.process.wait(15)
            self.log.close()
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


async def one_round(served: Served, turns: int, tag: str) -> dict[str, float]:
    conn = await Connection(HOST, served.port, served.api_key).open()
    firsts, dones = [], []
    for i in range(turns):
        status, first, done, names = await conn.stream(f"/api/sessions/sse-{tag}-{i}/turns/stream", {"text": TEXT})
        if status != 200 or names[-1:] != ["done"]:
            raise RuntimeError(f"{served.ref}: stream answered {status} {names}")
        firsts.append(first)
        dones.append(done)
    await conn.close()
    conn = await Connection(HOST, served.port, served.api_key).open()
    cpu, started = cpu_of(served.process.pid), time.perf_counter()
    for i in range(turns):
        status, body = await conn.request("POST", f"/api/sessions/json-{tag}-{i}/turns", {"text": TEXT})
        if status != 200:
            raise RuntimeError(f"{served.ref}: chat answered {status} {body[:200]!r}")
    seconds, cpu = time.perf_counter() - started, cpu_of(served.process.pid) - cpu
    await conn.close()
    return {
        "first_delta_ms": statistics.median(firsts) * 1000,
        "done_ms": statistics.median(dones) * 1000,
        "turns_per_s": turns / seconds,
        "cpu_ms_per_turn": cpu / turns * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("refs", nargs="+", help="commits (anything `git worktree add` takes)")
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pg", default=os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-commits-"))
    served: list[Served] = []
    try:
        for n, ref in enumerate(args.refs):
            path = scratch / f"{n}"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(path), ref], check=True)
            served.append(Served(ref, path, args.pg).start())
        results: dict[str, list[dict[str, float]]] = {s.ref: [] for s in served}
        for r in range(args.rounds):
            for s in served:
                results[s.ref].append(asyncio.run(one_round(s, args.turns, f"{r}-{uuid.uuid4().hex[:6]}")))
            print(f"round {r + 1}/{args.rounds}: load {loadavg()}", flush=True)
    finally:
        for s in served:
            s.stop()
        for n in range(len(args.refs)):
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(scratch / f"{n}")], check=False
            )
    print(f"\n{args.turns} turns a round, medians of {args.rounds} rounds, PostgreSQL, token delay 0\n")
    print("| commit | SSE first delta ms | SSE done ms | JSON turns/s | server CPU ms/turn |\n|---|---|---|---|---|")
    for ref, rounds in results.items():
        m = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        cells = [
            ref,
            f"{m['first_delta_ms']:.1f}",
            f"{m['done_ms']:.1f}",
            f"{m['turns_per_s']:.0f}",
            f"{m['cpu_ms_per_turn']:.1f}",
        ]
        print(f"| {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
