"""agentsite's `/langgraph/` beside the peers (bench.peers), through the SDK
scenarios of bench.sdk: its PASS / MISS lines against the targets of
(docs/scale.md, "Targets") (its columns are in bench.report's table), and
the `--profile` flame graph of agentsite under the 20 × 20 load."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path

from bench import peers
from bench.sdk import SdkSizes, Target, many

AGENTSITE = "agentsite"
AGENTSITE_LABEL = "agentsite /langgraph/"


def peer_target(peer: peers.Peer) -> Target:
    return Target(peer.name, peer.label, peer.url, None, peer.cpu, failure="" if peer.running else peer.status)


def agentsite_target(url: str, api_key: str, pid: int, pg_admin: str | None, database: str | None) -> Target:
    def counters() -> dict[str, float]:
        out = {"server": peers.tree_cpu(pid)}
        if pg_admin and database:
            out["postgresql"] = sum(peers.database_cpu(pg_admin, database).values())
        return out

    return Target(AGENTSITE, AGENTSITE_LABEL, f"{url}/langgraph", api_key, counters)


def median_columns(rounds: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    out = {}
    for name, results in rounds.items():
        keys = {k for r in results for k in r}
        out[name] = {k: statistics.median(r[k] for r in results if k in r) for k in keys}
    return out


def better_peer(columns: dict[str, dict[str, float]], metric: str, better: str) -> tuple[str, float] | None:
    values = [(name, c[metric]) for name, c in columns.items() if name != AGENTSITE and metric in c]
    if not values:
        return None
    pick = min if better == "low" else max
    return pick(values, key=lambda item: item[1])


# (metric, label, op, bound × the better peer): docs/scale.md, "Targets".
TARGETS = (
    ("many.runs_per_s", "20 × 20 runs/s", ">=", 1.5),
    ("wait.p50_ms", "new thread + runs.wait p50", "<=", 0.7),
    ("stream.first.p50_ms", "first token", "<=", 1.0),
    # Everything each server used for a run under the 20 × 20 load: its
    # processes, and the PostgreSQL backends and Redis of those that have
    # them (a server keeping runs in memory has none to count).
    ("many.all_cpu_ms", "20 × 20 CPU per run, server + its PostgreSQL + Redis", "<=", 1.0),
)
# A run on a long thread against a run on a new one.
GROWTH = 1.3


def checks(columns: dict[str, dict[str, float]], targets: list[Target]) -> list[tuple[str, bool]]:
    ours = columns.get(AGENTSITE, {})
    labels = {t.name: t.label for t in targets}
    out = []
    for metric, label, op, bound in TARGETS:
        best = better_peer(columns, metric, "high" if op == ">=" else "low")
        if best is None or metric not in ours:
            continue
        ratio = ours[metric] / best[1]
        ok = ratio >= bound if op == ">=" else ratio <= bound
        out.append((f"/langgraph/ {label}: {ratio:.2f}× the better peer ({labels[best[0]]}) {op} {bound}", ok))
    if "same.last20_over_first20" in ours:
        grew = ours["same.last20_over_first20"]
        text = f"/langgraph/ 200 runs, one thread: last 20 {grew:.2f}× first 20 <= {GROWTH}"
        out.append((text, grew <= GROWTH))
    if "contention.runs" in ours:
        every = ours["contention.committed"] == ours["contention.runs"]
        none = ours["contention.lost"] == 0 and ours["contention.duplicated"] == 0
        text = "/langgraph/ one thread, 5 clients, enqueue: every run committed, none lost or duplicated"
        out.append((text, every and none))
    for t in targets:
        if t.name != AGENTSITE and t.failure:
            out.append((f"{t.label} measured (it is not: {t.failure})", False))
    return out


def profile(target: Target, pid: int, sizes: SdkSizes, svg: Path, logs: Path) -> str:
    """A py-spy flame graph of agentsite's server process while the SDK's
    20 × 20 load runs, and the frames that took the most of it."""
    venv = peers.install("profile", log=logs / "profile.log")
    svg.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        [
            str(venv / "bin" / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--output",
            str(svg),
            "--format",
            "flamegraph",
            "--rate",
            "250",
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(logs / "py-spy.log", "ab"),  # noqa: SIM115 - the child writes it; closed when we exit
    )

    async def load() -> None:
        await target.open()
        try:
            for _ in range(sizes.batches):
                await many(target, sizes)
        finally:
            await target.close()

    try:
        asyncio.run(load())
    finally:
        if spy.poll() is None:
            spy.send_signal(signal.SIGINT)
        try:
            spy.wait(60)
        except subprocess.TimeoutExpired:
            os.kill(spy.pid, signal.SIGKILL)
    if not svg.exists():
        return f"py-spy wrote no flame graph: {(logs / 'py-spy.log').read_text(errors='replace')[-300:]}"
    return summary(svg)


FRAME = re.compile(r"<title>(.+?) \(([\d,]+) samples?, ([\d.]+)%\)</title>")
PROJECT = ("agentsite/", "core/", "graphs/", "langgraph_app/", "sessions_app/", "turns_app/")


def summary(svg: Path, top: int = 20) -> str:
    """The project's functions that took the largest share of the samples
    (inclusive: a function's callees count as its own; the same function at
    several places in the graph is added up)."""
    share: defaultdict[str, float] = defaultdict(float)
    for title, _, percent in FRAME.findall(svg.read_text(errors="replace")):
        title = title.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        where = re.search(r"^(.*) \((.+?):\d+\)$", title)
        if where and where.group(2).startswith(PROJECT):
            share[f"{where.group(1)} ({where.group(2)})"] += float(percent)
    lines = [f"  {percent:5.1f}%  {name}" for name, percent in sorted(share.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join([f"profile: {svg} (the project's functions, inclusive share of samples)", *lines])
