"""The one table `make bench` prints: every scenario a row, every server a
column — agentsite's `/api/` (bench.scenarios, on PostgreSQL, and on SQLite
when it ran), agentsite's `/langgraph/` and the peers (bench.sdk, through
the LangGraph SDK), and the floor (bare LangGraph, bench.floor) — with
"–" where a scenario does not apply to a column, and the ratios the
targets are set on: `/api/` ÷ floor and `/langgraph/` ÷ the better peer."""

from __future__ import annotations

from bench.compare import AGENTSITE, better_peer
from bench.sdk import Target

# (label, the /api/ and floor metric, the SDK metric, the better value:
# "low" | "high", or None for a count, which gets no ratio)
ROWS = [
    ("new session / thread, one run: p50 ms", "fresh.p50_ms", "wait.p50_ms", "low"),
    ("new session / thread, one run: p95 ms", "fresh.p95_ms", "wait.p95_ms", "low"),
    ("new session, one turn after another: turns/s", "fresh.turns_per_s", None, "high"),
    ("new session / thread: server CPU ms per run", "fresh.cpu_ms", "wait.cpu_ms", "low"),
    ("new thread: PostgreSQL CPU ms per run", None, "wait.postgresql_cpu_ms", "low"),
    ("new thread: Redis CPU ms per run", None, "wait.redis_cpu_ms", "low"),
    ("new session: SQL statements per turn", "fresh.statements", None, "low"),
    ("stream: first token ms (p50)", "sse.first_delta_ms", "stream.first.p50_ms", "low"),
    ("stream: end ms (p50)", "sse.done_ms", "stream.end.p50_ms", "low"),
    ("20 clients × 20 runs: runs/s", "concurrent.turns_per_s", "many.runs_per_s", "high"),
    ("20 clients × 20 runs: p50 ms", "concurrent.p50_ms", "many.p50_ms", "low"),
    ("20 clients × 20 runs: server CPU ms per run", "concurrent.cpu_ms", "many.cpu_ms", "low"),
    ("20 clients × 20 runs: PostgreSQL CPU ms per run", None, "many.postgresql_cpu_ms", "low"),
    ("20 clients × 20 runs: Redis CPU ms per run", None, "many.redis_cpu_ms", "low"),
    ("20 clients × 20 runs: all CPU ms per run (server + its PostgreSQL + Redis)", None, "many.all_cpu_ms", "low"),
    ("two daphne processes, 20 × 20: runs/s", "two_processes.turns_per_s", None, "high"),
    ("5 clients × 20 runs, one session / thread: runs sent", "contention.runs", "contention.runs", None),
    ("5 clients × 20 runs, one thread: committed", "contention.committed", "contention.committed", None),
    ("5 clients × 20 runs, one thread: lost", "contention.lost", "contention.lost", None),
    ("5 clients × 20 runs, one thread: duplicated", None, "contention.duplicated", None),
    ("5 clients × 20 runs, one thread: refused", "contention.refused", "contention.refused", None),
    ("5 clients × 20 runs, one thread: p50 ms", "contention.p50_ms", "contention.p50_ms", "low"),
    ("5 clients × 20 runs, one thread: p99 ms", "contention.p99_ms", None, "low"),
    ("5-step tool run: p50 ms", None, "tools.p50_ms", "low"),
    ("5-step tool run: server CPU ms per run", None, "tools.cpu_ms", "low"),
    ("200 runs, one thread: p50 ms", "same.p50_ms", "same.p50_ms", "low"),
    ("200 runs, one thread: last 20 ÷ first 20 (p50)", "same.last20_over_first20", "same.last20_over_first20", "low"),
    ("200 runs, one thread: runs the thread holds at the end", None, "same.runs_kept", None),
    ("200 runs, one session: CPU ms per turn", "same.cpu_ms", None, "low"),
    ("200 runs, one session: SQL statements per turn", "same.statements", None, "low"),
    ("200 runs, one session: bytes written per turn, first 20", "same.bytes_first20", None, None),
    ("200 runs, one session: bytes written per turn, last 20", "same.bytes_last20", None, None),
]

API_COLUMNS = {"postgresql": "agentsite /api/", "sqlite": "agentsite /api/ (SQLite)"}


def _cell(values: dict[str, float], metric: str | None) -> str:
    return f"{values[metric]:.2f}" if metric is not None and metric in values else "–"


def render(api: dict[str, dict[str, float]], sdk: dict[str, dict[str, float]], targets: list[Target]) -> str:
    """`api`: the `/api/` sides' medians (postgresql, sqlite, floor);
    `sdk`: the SDK targets' medians by name; `targets`: the SDK targets in
    column order (agentsite's `/langgraph/` first, then the peers)."""
    columns: list[tuple[str, str, str]] = [("api", side, label) for side, label in API_COLUMNS.items() if side in api]
    columns += [("sdk", t.name, t.label) for t in targets]
    columns.append(("api", "floor", "floor (bare LangGraph)"))
    head = (
        "| scenario | " + " | ".join(label for *_, label in columns) + " | /api/ ÷ floor | /langgraph/ ÷ better peer |"
    )
    lines = [head, "|" + "---|" * (len(columns) + 3)]
    failures = {t.name: t.failure for t in targets}
    status = [
        "**" + failures[name] + "**" if kind == "sdk" and failures.get(name) else "running" for kind, name, _ in columns
    ]
    lines.append("| server | " + " | ".join(status) + " | | |")
    floor = api.get("floor", {})
    ours = sdk.get(AGENTSITE, {})
    for label, api_metric, sdk_metric, better in ROWS:
        cells = [
            _cell(
                api.get(name, {}) if kind == "api" else sdk.get(name, {}), api_metric if kind == "api" else sdk_metric
            )
            for kind, name, _ in columns
        ]
        if all(c == "–" for c in cells):
            continue
        vs_floor = "–"
        pg = api.get("postgresql", {})
        base_metric = "concurrent.turns_per_s" if api_metric == "two_processes.turns_per_s" else api_metric
        if better and api_metric in pg and floor.get(base_metric or ""):
            vs_floor = f"{pg[api_metric] / floor[base_metric]:.2f}"
        vs_peer = "–"
        best = better_peer(sdk, sdk_metric, better) if better and sdk_metric else None
        if best and sdk_metric in ours and best[1]:
            vs_peer = f"{ours[sdk_metric] / best[1]:.2f}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {vs_floor} | {vs_peer} |")
    return "\n".join(lines)
