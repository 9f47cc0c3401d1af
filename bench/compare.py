"""agentsite's `/langgraph/` beside the peers (bench.peers), through the SDK
scenarios of bench.sdk: the second table `make bench` prints, its PASS /
MISS lines against the targets of (docs/scale.md, "Targets"), and the
`--profile` flame graph of agentsite under the 20 × 20 load."""

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

ROWS = [
    # (metric, label, the better value: "low" | "high" | None)
    ("wait.p50_ms", "new thread + runs.wait: p50 ms", "low"),
    ("wait.p95_ms", "new thread + runs.wait: p95 ms", "low"),
    ("wait.cpu_ms", "new thread + runs.wait: server CPU ms per run", "low"),
    ("wait.postgresql_cpu_ms", "new thread + runs.wait: PostgreSQL CPU ms per run", "low"),
    ("wait.redis_cpu_ms", "new thread + runs.wait: Redis CPU ms per run", "low"),
    ("stream.first.p50_ms", "runs.stream: first token ms (p50)", "low"),
    ("stream.end.p50_ms", "runs.stream: end ms (p50)", "low"),
    ("many.runs_per_s", "20 clients × 20 runs: runs/s", "high"),
    ("many.p50_ms", "20 clients × 20 runs: p50 ms", "low"),
    ("many.cpu_ms", "20 clients × 20 runs: server CPU ms per run", "low"),
    ("many.postgresql_cpu_ms", "20 clients × 20 runs: PostgreSQL CPU ms per run", "low"),
    ("many.redis_cpu_ms", "20 clients × 20 runs: Redis CPU ms per run", "low"),
    ("contention.runs", "5 clients × 20 runs, one thread (enqueue): runs sent", None),
    ("contention.committed", "5 clients × 20 runs, one thread: committed", None),
    ("contention.lost", "5 clients × 20 runs, one thread: lost", None),
    ("contention.duplicated", "5 clients × 20 runs, one thread: duplicated", None),
    ("contention.refused", "5 clients × 20 runs, one thread: refused", None),
    ("contention.p50_ms", "5 clients × 20 runs, one thread: p50 ms", "low"),
    ("tools.p50_ms", "5-step tool run: p50 ms", "low"),
    ("tools.cpu_ms", "5-step tool run: server CPU ms per run", "low"),
    ("same.p50_ms", "200 runs, one thread: p50 ms", "low"),
    ("same.last20_over_first20", "200 runs, one thread: last 20 ÷ first 20 (p50)", "low"),
]


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


def render(columns: dict[str, dict[str, float]], targets: list[Target]) -> str:
    names = [t.name for t in targets]
    head = "| metric | " + " | ".join(t.label for t in targets) + " | agentsite ÷ better peer |"
    lines = [head, "|" + "---|" * (len(targets) + 2)]
    status = ["running" if not t.failure else f"**{t.failure}**" for t in targets]
    lines.append("| server | " + " | ".join(status) + " | |")
    for metric, label, better in ROWS:
        if not any(metric in columns.get(n, {}) for n in names):
            continue
        cells = [f"{columns[n][metric]:.2f}" if metric in columns.get(n, {}) else "–" for n in names]
        ratio = "–"
        best = better_peer(columns, metric, better) if better else None
        if best and metric in columns.get(AGENTSITE, {}) and best[1]:
            ratio = f"{columns[AGENTSITE][metric] / best[1]:.2f}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def checks(columns: dict[str, dict[str, float]], targets: list[Target]) -> list[tuple[str, bool]]:
    ours = columns.get(AGENTSITE, {})
    labels = {t.name: t.label for t in targets}
    out = []
    for metric, label, op, bound in (
        ("many.runs_per_s", "20 × 20 runs/s", ">=", 1.5),
        ("wait.p50_ms", "new thread + runs.wait p50", "<=", 0.7),
        ("stream.first.p50_ms", "first token", "<=", 1.0),
    ):
        best = better_peer(columns, metric, "high" if op == ">=" else "low")
        if best is None or metric not in ours:
            continue
        ratio = ours[metric] / best[1]
        ok = ratio >= bound if op == ">=" else ratio <= bound
        out.append((f"/langgraph/ {label}: {ratio:.2f}× the better peer ({labels[best[0]]}) {op} {bound}", ok))
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
