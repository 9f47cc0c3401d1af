"""`make bench`'s harness runs end to end: a smoke pass (a few turns of every
scenario of docs/scale.md, "Targets") exits 0, prints the ratio table and writes JSON with
every scenario, for agentsite on PostgreSQL and SQLite and for the floor,
and the LangGraph SDK scenarios against agentsite's /langgraph/, all in one
table (bench.report) with the load at start and end.
Not a timed test: no figure is checked against a target here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.system

# Every scenario of (docs/scale.md, "Targets"), by the metric the harness reports for it.
AGENTSITE_METRICS = {
    "fresh.p50_ms",
    "fresh.p95_ms",
    "fresh.turns_per_s",
    "fresh.cpu_ms",  # sequential, fresh sessions
    "same.p50_ms",
    "same.cpu_ms",
    "same.last20_over_first20",  # one session, last 20 ÷ first 20
    "concurrent.turns_per_s",
    "concurrent.cpu_ms",  # 20 clients × 20 turns, distinct sessions
    "contention.p50_ms",
    "contention.p99_ms",  # 5 clients × 20 turns, one session …
    "contention.committed",
    "contention.refused",
    "contention.lost",  # … checked in the database
    "sse.first_delta_ms",
    "sse.done_ms",  # time to first delta
}
POSTGRES_ONLY = {
    "two_processes.turns_per_s",  # two daphne processes on one PostgreSQL
    "fresh.statements",
    "same.statements",  # statements per turn
    "same.bytes_first20",
    "same.bytes_last20",  # commit bytes independent of length
}
FLOOR_METRICS = {
    "fresh.p50_ms",
    "fresh.cpu_ms",
    "same.p50_ms",
    "same.last20_over_first20",
    "concurrent.turns_per_s",
    "sse.first_delta_ms",
    "contention.lost",
    "fresh.statements",
}

# What bench.sdk reports for every LangGraph server.
SDK_METRICS = {
    "wait.p50_ms",
    "wait.cpu_ms",
    "wait.postgresql_cpu_ms",  # new thread + runs.wait
    "stream.first.p50_ms",
    "stream.end.p50_ms",  # runs.stream, values + messages-tuple
    "many.runs_per_s",
    "many.cpu_ms",  # 20 clients × 20 runs
    "contention.runs",
    "contention.committed",
    "contention.lost",
    "contention.duplicated",  # one thread, enqueue
    "tools.p50_ms",  # the 5-step tool run
    "same.last20_over_first20",  # 200 runs on one thread
}


def postgres_url() -> str:
    """The suite's PostgreSQL on the PostgreSQL pass; TEST_POSTGRES_URL or the
    harness's default on the SQLite pass (the harness creates its own databases)."""
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        return database_url
    return os.environ.get("TEST_POSTGRES_URL") or "postgres://postgres@127.0.0.1:5432/postgres"


def test_bench_smoke_runs_every_scenario(tmp_path):
    out = tmp_path / "bench.json"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--pg", postgres_url(), "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    head = (
        "| scenario | agentsite /api/ | agentsite /api/ (SQLite) | agentsite /langgraph/ | floor (bare LangGraph) "
        "| /api/ ÷ floor | /langgraph/ ÷ better peer |"
    )
    assert lines.count(head) == 1, done.stdout  # one table, every server a column
    row = next(line for line in lines if line.startswith("| new session / thread: server CPU ms per run |"))
    assert "–" not in row.split("|")[2:6], row  # /api/ (both), /langgraph/ and the floor measured it
    tool_row = next(line for line in lines if line.startswith("| 5-step tool run: p50 ms |"))
    assert tool_row.split("|")[2].strip() == "–", tool_row  # no tool run through /api/
    assert any(line.startswith("load at start: ") and "; at end: " in line for line in lines), done.stdout
    assert any(line.strip().startswith(("PASS", "MISS")) for line in lines), done.stdout

    report = json.loads(out.read_text())
    columns = report["columns"]
    assert set(columns) == {"floor", "postgresql", "sqlite"}
    assert set(columns["postgresql"]) >= AGENTSITE_METRICS | POSTGRES_ONLY, sorted(columns["postgresql"])
    assert set(columns["sqlite"]) >= AGENTSITE_METRICS, sorted(columns["sqlite"])
    assert set(columns["floor"]) >= FLOOR_METRICS, sorted(columns["floor"])
    for side in ("postgresql", "sqlite"):
        # Same-session contention: every turn committed, none refused, none lost.
        figures = columns[side]
        assert figures["contention.lost"] == 0 and figures["contention.refused"] == 0, figures
        assert figures["contention.committed"] > 0
    assert report["checks"] and report["smoke"] is True

    # The SDK scenarios (bench.sdk), against agentsite's /langgraph/ alone:
    # the smoke pass installs no peer.
    sdk = report["sdk"]
    assert sdk["servers"] == {"agentsite": "running"}, sdk["servers"]
    ours = sdk["columns"]["agentsite"]
    assert set(ours) >= SDK_METRICS, sorted(ours)
    assert ours["contention.committed"] == ours["contention.runs"] > 0, ours
    assert ours["contention.lost"] == ours["contention.duplicated"] == ours["contention.refused"] == 0, ours
    assert report["load_before"] and report["load_after"] and report["seconds"]
    assert any(line.startswith("| server | running |") for line in lines), done.stdout
