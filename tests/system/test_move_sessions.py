"""Outgrowing SQLite (docs/operations.md, "Moving from SQLite to PostgreSQL"),
as a user does it: a server on the embedded SQLite file holds 20 conversations mid-way (4 of them paused, waiting for a
booking's approval), the server stops, `manage.py move_sessions --to
postgres://…` runs, a server starts on PostgreSQL, and every conversation
goes on where it was: earlier fields and messages there, versions
continuing, pauses resumed exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.system.server import ROOT

pytestmark = pytest.mark.system

SESSIONS = 20
PAUSED = 4  # booking sessions waiting for approval
BOOK = "Book a table for {n} people on 2031-05-01 at 19:30, my name is Ada Lovelace"


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done


def test_twenty_sessions_move_from_sqlite_to_postgres_mid_conversation(servers, scratch_postgres, tmp_path):
    sqlite_url = f"sqlite:///{tmp_path / 'agentsite.sqlite3'}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": sqlite_url}
    manage(env, "migrate", "--noinput")
    key = manage(env, "create_api_key", "alice").stdout.strip()
    headers = {"Authorization": f"Bearer {key}"}

    sqlite_server = servers(DATABASE_URL=sqlite_url)
    before: dict[str, dict] = {}
    with httpx.Client(base_url=f"{sqlite_server.url}/api", headers=headers, timeout=30) as http:
        for n in range(SESSIONS):
            if n < PAUSED:
                assert http.post("/sessions", json={"key": f"s{n}", "graph": "booking"}).status_code == 201
                answer = http.post(f"/sessions/s{n}/turns", json={"text": BOOK.format(n=n + 2)}).json()
                assert answer["status"] == "interrupted", answer
            else:
                http.post(f"/sessions/s{n}/turns", json={"text": f"Hi, I am Ada Lovelace{n}"}).raise_for_status()
                answer = http.post(f"/sessions/s{n}/turns", json={"text": f"ada{n}@example.com"}).json()
                assert answer["fields"] == {"name": f"Ada Lovelace{n}", "email": f"ada{n}@example.com"}
            before[f"s{n}"] = answer
    sqlite_server.stop()

    pg_url = scratch_postgres()
    started = time.monotonic()
    moved = manage(env, "move_sessions", "--to", pg_url)
    seconds = time.monotonic() - started
    assert f"moved {SESSIONS} session(s)" in moved.stdout and f"{PAUSED} checkpoint thread(s)" in moved.stdout

    pg_server = servers(DATABASE_URL=pg_url)
    with httpx.Client(base_url=f"{pg_server.url}/api", headers=headers, timeout=30) as http:
        for n in range(SESSIONS):
            key_n, earlier = f"s{n}", before[f"s{n}"]
            if n < PAUSED:
                answer = http.post(f"/sessions/{key_n}/turns", json={"resume": {"action": "approve"}}).json()
                assert answer["status"] == "committed", answer
                assert f"table for {n + 2} on 2031-05-01 at 19:30" in answer["reply"] and "BK-" in answer["reply"]
                again = http.post(f"/sessions/{key_n}/turns", json={"resume": {"action": "approve"}})
                assert again.status_code == 409 and again.json()["error"]["code"] == "interrupt_resolved"
                said = [BOOK.format(n=n + 2)]
            else:
                answer = http.post(f"/sessions/{key_n}/turns", json={"text": "2031-05-01"}).json()
                # The offline model asks for the next missing field: it knows
                # the name and email given on SQLite.
                assert answer["fields"] == {
                    "name": f"Ada Lovelace{n}",
                    "email": f"ada{n}@example.com",
                    "preferred_date": "2031-05-01",
                }
                assert "party" in answer["reply"].lower(), answer["reply"]
                said = [f"Hi, I am Ada Lovelace{n}", f"ada{n}@example.com", "2031-05-01"]
            assert answer["version"] == earlier["version"] + 1
            assert answer["epoch"] == earlier["epoch"]
            messages = http.get(f"/sessions/{key_n}/messages").json()
            assert [m["content"] for m in messages if m["role"] == "user"] == said
            turn_ids = [t["id"] for t in http.get(f"/sessions/{key_n}/turns").json()]
            assert earlier["turn_id"] in turn_ids and answer["turn_id"] in turn_ids
    print(f"\nmove_sessions: {SESSIONS} sessions ({PAUSED} paused): {moved.stdout.strip()}; process {seconds:.2f} s")
