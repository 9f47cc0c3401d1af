"""Statements and bytes per turn on PostgreSQL (bench.run): PostgreSQL's
statement log, switched on for a short counting pass, and the size of what
each commit wrote."""

from __future__ import annotations

import asyncio
import glob
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from bench.client import Connection
from bench.servers import HOST, ROOT, Database, Server, base_env, chat

# --- statements and bytes per turn (PostgreSQL) ---------------------------------------------------


def postgres_log() -> Path | None:
    found = sorted(glob.glob("/var/log/postgresql/postgresql-*-main.log"))
    return Path(found[-1]) if found else None


class StatementLog:
    """log_statement=all for the length of a `with`, then reset: counts the
    statements PostgreSQL received for one database. The log is read as a
    file when this user may, else through the server (pg_read_binary_file,
    for a superuser: the log is often readable by postgres only)."""

    def __init__(self, admin_url: str, database: str) -> None:
        self.admin_url, self.database, self.path = admin_url, database, postgres_log()
        self.offset = 0

    def __enter__(self) -> StatementLog:
        if self.path is not None:
            self._set("all")
            self.offset = self._size()
        return self

    def __exit__(self, *exc) -> None:
        if self.path is not None:
            self._set(None)

    def _set(self, value: str | None) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            if value is None:
                conn.execute("ALTER SYSTEM RESET log_statement")
            else:
                conn.execute(f"ALTER SYSTEM SET log_statement = '{value}'")
            conn.execute("SELECT pg_reload_conf()")
        time.sleep(0.3)  # the backends pick the setting up

    def _size(self) -> int:
        if os.access(self.path, os.R_OK):
            return self.path.stat().st_size
        with psycopg.connect(self.admin_url) as conn:
            return conn.execute("SELECT (pg_stat_file(%s)).size", (str(self.path),)).fetchone()[0]

    def _read(self) -> bytes:
        if os.access(self.path, os.R_OK):
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                return handle.read()
        with psycopg.connect(self.admin_url) as conn:
            length = conn.execute("SELECT (pg_stat_file(%s)).size", (str(self.path),)).fetchone()[0] - self.offset
            if length <= 0:
                return b""
            return conn.execute(
                "SELECT pg_read_binary_file(%s, %s, %s)", (str(self.path), self.offset, length)
            ).fetchone()[0]

    def count(self) -> int | None:
        if self.path is None:
            return None
        raw = self._read()
        self.offset += len(raw)
        text = raw.decode("utf-8", "replace")
        marker = f"@{self.database} "
        return sum(1 for line in text.splitlines() if marker in line and ("statement: " in line or " execute " in line))


async def count_agentsite_statements(server: Server, api_key: str, admin_url: str, turns: int) -> dict[str, float]:
    conn = await Connection(HOST, server.port, api_key).open()
    await chat(conn, "count-warm")
    out = {}
    with StatementLog(admin_url, server.database.name) as log:
        log.count()
        for i in range(turns):
            await chat(conn, f"count-fresh-{i}")
        await asyncio.sleep(0.3)
        fresh = log.count()
        for _ in range(turns):
            await chat(conn, "count-same")
        await asyncio.sleep(0.3)
        same = log.count()
    await conn.close()
    if fresh is not None:
        out["fresh.statements"] = fresh / turns
        out["same.statements"] = same / turns
    return out


def count_floor_statements(admin_url: str, database: str, turns: int) -> dict[str, float]:
    url = admin_url.rsplit("/", 1)[0] + "/" + database
    out = {}
    with StatementLog(admin_url, database) as log:
        for scenario in ("fresh", "same"):
            log.count()
            subprocess.run(
                [sys.executable, "-m", "bench.floor", "--db", url, "--scenario", scenario, "--turns", str(turns)],
                cwd=ROOT,
                env=base_env("sqlite:////tmp/agentsite-floor-unused.sqlite3"),
                capture_output=True,
                check=True,
            )
            time.sleep(0.3)
            counted = log.count()
            # The floor warms up with 10 turns (fresh threads) and sets its tables up first.
            if counted is not None:
                out[f"{scenario}.statements"] = counted / (turns + 10)
    return out


def bytes_per_turn(database: Database, key: str, window: int = 20) -> dict[str, float]:
    """Bytes the first and the last `window` committed turns of a session
    wrote to the turn and event tables (PostgreSQL's pg_column_size)."""
    rows = database.query(
        "SELECT pg_column_size(t.*) + coalesce((SELECT sum(pg_column_size(e.*)) FROM agent_turn_events e "
        "WHERE e.turn_id = t.id), 0) FROM agent_turns t JOIN agent_sessions s ON s.id = t.session_id "
        "WHERE s.key = %s ORDER BY t.number",
        (key,),
    )
    sizes = [r[0] for r in rows]
    if len(sizes) < 2 * window:
        return {}
    return {
        "same.bytes_first20": statistics.mean(sizes[:window]),
        "same.bytes_last20": statistics.mean(sizes[-window:]),
    }
