"""The `/api/` table `make bench` prints (agentsite ÷ floor) and its PASS /
MISS lines against (docs/scale.md, "Targets")."""

from __future__ import annotations

import statistics

from bench.scenarios import Result, Sizes

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
    ("concurrent.turns_per_s", "20 clients × 20 turns: turns/s", (">=", 1.0)),
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
