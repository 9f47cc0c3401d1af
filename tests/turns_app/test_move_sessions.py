"""`manage.py move_sessions --to postgres://…` (docs/operations.md,
"Moving from SQLite to PostgreSQL"):
every row of every moved model arrives identical (ids, versions,
timestamps), paused runs' checkpoint threads arrive with their pending
writes, and conversations continue on the target under a real server —
a pending interrupt resumes there. The source is the suite's own database:
SQLite → PostgreSQL on the SQLite pass, PostgreSQL → PostgreSQL on the other.
Targets are scratch databases (tests/scratch_postgres.py)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys

import httpx
import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection

from core.database import sqlite_lock_path
from sessions_app.models import AgentSession
from sessions_app.services import api_key_create, api_key_revoke
from tests.fixtures.api import Api
from tests.fixtures.runners import run_in_new_loop
from tests.fixtures.turns import pause_booking
from tests.scratch_postgres import url_for
from tests.system.server import ROOT, served_database_url
from turns_app import moving
from turns_app.moving import source as moving_source

BOOK = "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace"


def test_every_installed_model_is_moved_or_said_why_not():
    """A model added later is moved (it is in a moved app) or listed, with a
    reason, as staying behind; never silently skipped."""
    installed = {m._meta.label_lower for m in apps.get_models()}
    moved = {m._meta.label_lower for m in moving.moved_models()}
    assert moved.isdisjoint(moving.NOT_MOVED) and moved.isdisjoint(moving.DERIVED)
    assert installed == moved | set(moving.NOT_MOVED) | set(moving.DERIVED)
    assert {
        "sessions_app.agentsession",
        "sessions_app.apikey",
        "turns_app.agentturn",
        "turns_app.agentturnevent",
        "booking.booking",
    } <= moved
    # Parents before the rows that point at them.
    order = [m._meta.label_lower for m in moving.moved_models()]
    assert order.index("sessions_app.agentsession") < order.index("turns_app.agentturn")
    assert order.index("turns_app.agentturn") < order.index("turns_app.agentturnevent")


def rows(alias: str) -> dict[str, list[dict]]:
    return {m._meta.db_table: list(m._base_manager.using(alias).order_by("pk").values()) for m in moving.moved_models()}


def target_rows(url: str) -> dict[str, list[dict]]:
    """The target's rows as psycopg reads them (this process's test case
    allows no second Django connection)."""
    import psycopg
    from psycopg.rows import dict_row

    found = {}
    with psycopg.connect(url, row_factory=dict_row) as conn:
        for model in moving.moved_models():
            meta = model._meta
            columns = ", ".join(f.column for f in meta.concrete_fields)
            query = f"SELECT {columns} FROM {meta.db_table} ORDER BY {meta.pk.column}"
            found[meta.db_table] = [dict(row) for row in conn.execute(query)]
    return found


def move(*args: str) -> subprocess.CompletedProcess:
    """`manage.py move_sessions` on the suite's database, as an operator runs it."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": served_database_url()}
    return subprocess.run(
        [sys.executable, "manage.py", "move_sessions", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def moved(*args: str) -> None:
    done = move(*args)
    assert done.returncode == 0, done.stderr


def refused(*args: str) -> str:
    """The one line a refused move ends with (exit status 1)."""
    done = move(*args)
    assert done.returncode == 1, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("CommandError: "), done.stderr
    return last


def thread_state(saver, thread_id: str):
    found = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    return found.checkpoint["channel_values"], found.pending_writes, found.metadata


def target_thread_state(url: str, thread_id: str):
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        return thread_state(PostgresSaver(conn), thread_id)


def sessions_in_progress(alice: str, bob: str) -> None:
    """Conversations mid-way, a tombstone, a paused booking, a finished one,
    another owner's session and a revoked key."""
    api, api_bob = Api(alice), Api(bob)

    async def fill():
        for n in range(3):
            assert (await api.chat(f"intake-{n}", f"Hi, I am Ada Lovelace{n}")).status_code == 200
            assert (await api.chat(f"intake-{n}", f"ada{n}@example.com")).status_code == 200
        assert (await api.chat("gone", "Hi, I am Grace Hopper")).status_code == 200
        assert (await api.call("DELETE", "/sessions/gone")).status_code in (200, 204)
        await pause_booking(api, "b-paused")
        await pause_booking(api, "b-done")
        done = await api.call("POST", "/sessions/b-done/turns", {"resume": {"action": "approve"}})
        assert json.loads(done.content)["status"] == "committed"
        assert (await api_bob.chat("bobs", "Hi, I am Bob Dylan")).status_code == 200

    run_in_new_loop(fill)
    api_key_revoke(api_key=api_key_create(owner="carol")[0])


def test_move_copies_everything_and_conversations_continue_on_the_target(alice, bob, scratch_postgres, servers):
    sessions_in_progress(alice, bob)
    before = rows("default")
    assert len(before["agent_sessions"]) == 7 and len(before["booking_bookings"]) == 1
    paused = AgentSession.objects.get(key="b-paused")
    thread_id = paused.interrupt["thread_id"]
    source_saver, close = moving_source.source_saver()
    try:
        source_thread = thread_state(source_saver, thread_id)
    finally:
        close()
    assert source_thread[1], "a paused run has pending writes (its interrupt)"

    url = scratch_postgres()
    # Batches of 2: every table takes several pages.
    moved("--to", url, "--batch-size", "2")

    after = target_rows(url)
    assert after == before  # ids, versions, epochs, timestamps, tombstones, revoked keys
    assert target_thread_state(url, thread_id) == source_thread

    # Continue on the target, under a real server.
    server = servers(DATABASE_URL=url)
    headers = {"Authorization": f"Bearer {alice}"}
    session = {s["key"]: s for s in before["agent_sessions"]}
    with httpx.Client(base_url=f"{server.url}/api", headers=headers, timeout=30) as http:
        answer = http.post("/sessions/intake-0/turns", json={"text": "2031-05-01"}).json()
        assert answer["version"] == session["intake-0"]["version"] + 1
        assert answer["fields"] == {
            "name": "Ada Lovelace0",
            "email": "ada0@example.com",
            "preferred_date": "2031-05-01",
        }
        said = [m["content"] for m in http.get("/sessions/intake-0/messages").json() if m["role"] == "user"]
        assert said == ["Hi, I am Ada Lovelace0", "ada0@example.com", "2031-05-01"]
        # The pause waits on the target, and resumes there, exactly once.
        assert (
            http.get("/sessions/b-paused").json()["interrupts"][0]["value"]["action_requests"][0]["name"]
            == "book_table"
        )
        resumed = http.post("/sessions/b-paused/turns", json={"resume": {"action": "approve"}}).json()
        assert resumed["status"] == "committed", resumed
        assert resumed["version"] == session["b-paused"]["version"] + 1
        assert "BK-" in resumed["reply"]
        # A tombstone stays one: a chat on its key starts in the epoch the
        # delete began, its version going on from the one kept (re-created
        # at the next one, then the turn's commit).
        assert session["gone"]["deleted_at"] is not None and session["gone"]["epoch"] == 2
        revived = http.post("/sessions/gone/turns", json={"text": "hello"}).json()
        assert (revived["epoch"], revived["version"]) == (2, session["gone"]["version"] + 2)
        assert http.get("/sessions/bobs").status_code == 404  # still bob's
    moved_again = target_rows(url)
    assert len(moved_again["booking_bookings"]) == 2
    # New rows got fresh ids (sequences reset past the copied ones).
    events = [e["id"] for e in moved_again["agent_turn_events"]]
    assert len(events) == len(set(events)) > len(before["agent_turn_events"])


def test_a_target_that_holds_sessions_is_refused_unless_replace(alice, scratch_postgres):
    api = Api(alice)
    run_in_new_loop(lambda: pause_booking(api, "b1"))
    thread_id = AgentSession.objects.get(key="b1").interrupt["thread_id"]
    url = scratch_postgres()
    moved("--to", url)
    assert target_checkpoint_threads(url) == [thread_id]
    assert re.search(r"already holds 1 row\(s\) in agent_api_keys.*--replace", refused("--to", url))
    # The pause answered on the source: its thread goes; --replace leaves the
    # target as the source is now, checkpoints included.
    run_in_new_loop(lambda: api.call("POST", "/sessions/b1/turns", {"resume": {"action": "approve"}}))
    moved("--to", url, "--replace")
    assert target_rows(url) == rows("default")
    assert target_checkpoint_threads(url) == []


def target_checkpoint_threads(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")]


def test_bad_targets_are_refused_in_one_line(transactional_db, scratch_postgres):
    for url, says in [
        ("foo", "--to must be a PostgreSQL URL"),
        ("mysql://u@127.0.0.1/x", "--to must be a PostgreSQL URL"),
        ("sqlite:////tmp/x.sqlite3", "--to must be a PostgreSQL URL"),
        ("postgres://postgres@127.0.0.1:5432", "names no database"),
        (url_for("move_no_such_database"), 'has no database "move_no_such_database"'),
    ]:
        with pytest.raises(CommandError, match=says):
            call_command("move_sessions", "--to", url)


def test_the_command_exits_non_zero_with_the_reason_last(transactional_db):
    assert refused("--to", "mysql://u@h/x") == (
        "CommandError: --to must be a PostgreSQL URL (postgres://USER:PASSWORD@HOST:5432/NAME), got 'mysql://u@h/x'"
    )


@pytest.mark.postgres_only
def test_the_source_itself_is_refused_as_target(transactional_db):
    same = served_database_url()
    for url in (same, same.replace("127.0.0.1", "localhost")):
        assert "names the database this server already uses" in refused("--to", url)


@pytest.mark.sqlite_only
def test_a_served_sqlite_file_is_refused(transactional_db, scratch_postgres):
    url = scratch_postgres()
    with open(sqlite_lock_path(connection.settings_dict["NAME"]), "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.seek(0)
        held.truncate()
        held.write("4242")
        held.flush()
        assert re.search(r"server \(pid 4242\) is serving .*stop it first", refused("--to", url))
    moved("--to", url)  # the lock gone, it moves


@pytest.mark.sqlite_only  # PostgreSQL cannot hold U+0000: no such source there
def test_a_transcript_with_nul_is_refused_or_stripped(alice, scratch_postgres):
    """Rows from before the service refused U+0000 (or written by hand)."""
    from turns_app.models import AgentTurn

    run_in_new_loop(lambda: Api(alice).chat("s1", "Hi, I am Ada Lovelace"))
    turn = AgentTurn.objects.get()
    turn.messages[0]["data"]["content"] = "Hi, I am Ada\x00 Lovelace"
    turn.save(update_fields=["messages"])
    url = scratch_postgres()
    last = refused("--to", url)
    assert re.search(rf"agent_turns row {turn.id} holds the NUL character .*`messages`.*--strip-nul", last)
    assert all(table == [] for table in target_rows(url).values())  # nothing moved
    moved("--to", url, "--strip-nul")
    (copied,) = target_rows(url)["agent_turns"]
    assert copied["messages"][0]["data"]["content"] == "Hi, I am Ada Lovelace"
