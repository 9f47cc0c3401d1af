"""The `/api/` targets (agentsite ÷ floor, docs/scale.md, "Targets") and
their PASS / MISS lines; the medians over rounds they are read from (the
table is bench.report's)."""

from __future__ import annotations

import statistics

from bench.scenarios import Result, Sizes

# (metric, label, target as (op, ratio bound) × the floor)
ROWS = [
    ("fresh.p50_ms", "fresh sessions: p50 ms", ("<=", 2.0)),
    ("fresh.cpu_ms", "fresh sessions: CPU ms per turn", ("<=", 2.0)),
    ("concurrent.turns_per_s", "20 clients × 20 turns: turns/s", (">=", 1.0)),
    ("two_processes.turns_per_s", "two daphne processes, 20 × 20: turns/s", (">=", 1.2)),
    ("sse.first_delta_ms", "SSE: first delta ms", ("<=", 2.0)),
]


def median_of(results: list[Result]) -> dict[str, float]:
    keys = {k for r in results for k in r.values}
    return {k: statistics.median(r.values[k] for r in results if k in r.values) for k in keys}


def checks(pg: dict[str, float], floor: dict[str, float], sizes: Sizes) -> list[tuple[str, bool, str]]:
    out = []
    for metric, label, target in ROWS:
        if metric not in pg:
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
