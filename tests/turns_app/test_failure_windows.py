"""The failure windows (docs/invariants.md, "Failure windows"), with the crash simulated in-process: the
protocol's steps are called one by one and the process "dies" between two of
them (nothing after the crash point runs). Killing real server processes is
tests/system's job."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from tests.fixtures.turns import claim_turn, pause_booking, transcript_of
from turns_app import history
from turns_app.checkpoint_tables import checkpoint_tables, delete_threads
from turns_app.graph_step import run_graph
from turns_app.models import AgentTurn
from turns_app.services import turn_abort, turn_commit, turns_abort_pending

pytestmark = pytest.mark.django_db(transaction=True)


async def _no_events(event, data):
    return None


def checkpoint_rows() -> int:
    total = 0
    with connection.cursor() as cursor:
        for table in checkpoint_tables():
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            total += cursor.fetchone()[0]
    return total


def thread_rows(thread_id: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM checkpoints WHERE thread_id = %s", [thread_id])
        return cursor.fetchone()[0]


def session_row(key: str = "s1") -> AgentSession:
    return AgentSession.objects.get(owner="alice", key=key)


def turn_rows() -> list[AgentTurn]:
    return list(AgentTurn.objects.order_by("number"))


async def claim(text: str, idem: str | None = None):
    return await claim_turn("s1", text, idem)


async def test_crash_after_the_run_before_commit(api, script):
    """The run finished, the business commit did not: the run wrote nothing
    lasting (a finished run's checkpoints stay in its process's memory), the
    pending turn is aborted (at start-up in single-process mode, or by lease
    expiry) and the next turn starts from the last committed state."""
    await api.chat("s1", "hello")
    await api.chat("s1", "Ada Lovelace")
    before = await orm(session_row)

    lost = await claim("ada@example.com")
    outcome = await run_graph(lost, _no_events)
    assert outcome.fields.get("email") == "ada@example.com"  # what would have landed
    assert await orm(checkpoint_rows) == 0  # nothing of it in the database
    # -- crash: turn_commit never runs --

    assert await orm(turns_abort_pending) == 1  # what start-up does
    after = await orm(session_row)
    assert (after.version, after.fields, after.head_turn_id) == (before.version, before.fields, before.head_turn_id)
    assert after.active_turn_id is None
    assert (await orm(turn_rows))[-1].status == "aborted"

    reply = json.loads((await api.chat("s1", "2031-05-06")).content)
    assert reply["version"] == before.version + 1
    assert "email" not in reply["fields"]
    prompt = " ".join(str(m.content) for m in script.last("reply")["messages"])
    assert "ada@example.com" not in prompt


async def test_lease_expiry_aborts_dead_turn(api, script, settings):
    """Same window on a shared database: nobody restarts, the lease runs out
    and the next claim aborts the dead turn."""
    settings.AGENT_TURN_LEASE_SECONDS = 0.2
    await api.chat("s1", "hello")
    dead = await claim("Ada Lovelace")
    await run_graph(dead, _no_events)
    # -- the process holding `dead` is gone; its lease is not renewed --
    busy = await api.chat("s1", "Grace Hopper")
    assert busy.status_code == 200  # waited for the lease, then proceeded
    statuses = [(t.status, (t.error or {}).get("code")) for t in await orm(turn_rows)]
    assert statuses == [("committed", None), ("aborted", "lease_expired"), ("committed", None)]
    assert (await orm(session_row)).fields["name"] == "Grace Hopper"


async def test_the_conversation_comes_from_the_turn_rows(api, script):
    """Business committed, checkpoints gone and this process's cache cold:
    the next turn starts from the conversation the committed turns hold, and
    no field change is applied twice."""
    await api.chat("s1", "hello")
    await api.chat("s1", "Ada Lovelace")
    row = await orm(session_row)
    await orm(delete_threads, thread_ids=[t.checkpoint_thread for t in await orm(turn_rows)])
    history.cache().forget(row.id)

    reply = json.loads((await api.chat("s1", "ada@example.com")).content)
    assert reply["version"] == row.version + 1
    assert reply["field_changes"] == {"email": "ada@example.com"}  # name not re-applied
    assert reply["fields"] == {"name": "Ada Lovelace", "email": "ada@example.com"}
    prompt = [str(m.content) for m in script.last("reply")["messages"]]
    assert prompt.count("Ada Lovelace") == 1  # the conversation, once, from the rows
    assert [m["content"] for m in await orm(transcript_of, session=await orm(session_row))][0::2] == [
        "hello",
        "Ada Lovelace",
        "ada@example.com",
    ]


async def test_a_paused_run_whose_checkpoint_is_gone_cannot_resume_silently(api, script):
    """Business committed as interrupted, its checkpoint deleted behind our
    back: a resume is refused (`state_lost`), nothing is committed, and the
    session can be rewound to go on."""
    paused = await pause_booking(api, "b1")
    session = await orm(session_row, key="b1")
    await orm(delete_threads, thread_ids=[session.interrupt["thread_id"]])
    response = await api.call("POST", "/sessions/b1/turns", {"resume": {"action": "approve"}})
    assert response.status_code == 409
    assert json.loads(response.content)["error"]["code"] == "state_lost"
    after = await orm(session_row, key="b1")
    assert (after.version, after.head_turn_id, after.interrupt) == (
        session.version,
        session.head_turn_id,
        session.interrupt,
    )
    rewind = await api.call("POST", "/sessions/b1/rewind", {"turn_id": None, "expected_version": paused["version"]})
    assert rewind.status_code == 200, rewind.content


async def test_crash_after_commit_before_response_replays(api, script):
    """Business committed, response lost: the retry with the same key gets
    the stored result, byte for byte, and the model is not called again."""
    await api.chat("s1", "hello")
    claimed = await claim("Ada Lovelace", idem="retry-me")
    outcome = await run_graph(claimed, _no_events)
    stored = await orm(turn_commit, turn_id=claimed.turn_id, outcome=outcome)
    # -- crash: the response never left the process --
    calls = script.count()
    version = (await orm(session_row)).version

    retry = await api.chat("s1", "Ada Lovelace", idem="retry-me")
    assert retry.status_code == 200
    assert retry.content.decode() == stored
    assert script.count() == calls
    assert (await orm(session_row)).version == version


async def test_unexpected_commit_failure_is_not_done(api, script, monkeypatch):
    """An unexpected error at the commit (here the fault hook in `raise`
    mode): the client gets an error, never the body; nothing lands, and the
    turn is aborted so the session is free again at once."""
    monkeypatch.setenv("AGENT_FAULT_POINT", "before_commit")
    monkeypatch.setenv("AGENT_FAULT_ACTION", "raise")
    response = await api.chat("s1", "hello")
    assert response.status_code == 500
    assert json.loads(response.content)["error"]["code"] == "internal_error"
    row = await orm(session_row)
    assert (row.version, row.head_turn_id, row.active_turn_id) == (0, None, None)
    assert [t.status for t in await orm(turn_rows)] == ["aborted"]
    monkeypatch.delenv("AGENT_FAULT_POINT")
    assert (await api.chat("s1", "hello")).status_code == 200


async def test_abort_after_a_lost_commit_answer_keeps_the_committed_state(api, script):
    """The commit landed but its answer was lost (an outage), and the runner
    then aborts "its" turn: nothing committed may be undone or deleted."""
    await api.chat("s1", "hello")
    claimed = await claim("Ada Lovelace")
    outcome = await run_graph(claimed, _no_events)
    await orm(turn_commit, turn_id=claimed.turn_id, outcome=outcome)
    committed = await orm(session_row)

    final = await orm(
        turn_abort, turn_id=claimed.turn_id, code="storage_unavailable", message="x", thread_id=claimed.thread_id
    )
    assert final.event == "done"  # what ended the turn, as stored
    after = await orm(session_row)
    assert (after.version, after.fields, after.head_turn_id) == (
        committed.version,
        committed.fields,
        committed.head_turn_id,
    )
    assert (await orm(turn_rows))[-1].status == "committed"
