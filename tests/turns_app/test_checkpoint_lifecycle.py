"""What stays in LangGraph's tables: only paused runs' checkpoints (a
finished run's state is its turn rows), and only while the pause waits.
Answering, rewinding or deleting drops them; the sweep drops leftovers and
ends turns whose lease ran out."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from tests.fixtures.turns import claim_turn, pause_booking
from turns_app.checkpoint_tables import checkpoint_tables
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)


def rows(session_id) -> int:
    total = 0
    with connection.cursor() as cursor:
        for table in checkpoint_tables():
            cursor.execute(
                f"SELECT count(*) FROM {connection.ops.quote_name(table)} WHERE thread_id LIKE %s",
                [f"{session_id}:%"],
            )
            total += cursor.fetchone()[0]
    return total


def threads(session_id) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE %s", [f"{session_id}:%"])
        return {row[0] for row in cursor.fetchall()}


def session(key: str) -> AgentSession:
    return AgentSession.objects.get(key=key)


async def sweep() -> str:
    out = StringIO()
    await orm(call_command, command_name="sweep_checkpoints", stdout=out)
    return out.getvalue()


async def test_finished_turns_leave_no_checkpoints(api, script):
    for i in range(5):
        assert (await api.chat("s1", f"message {i}")).status_code == 200
    script.fail["reply"] = RuntimeError("boom")
    assert (await api.chat("s1", "lost")).status_code == 502
    assert await orm(rows, session_id=(await orm(session, key="s1")).id) == 0


async def test_a_pause_keeps_its_checkpoint_until_answered(api, script):
    await pause_booking(api, "b1")
    paused = await orm(session, key="b1")
    assert await orm(threads, session_id=paused.id) == {paused.interrupt["thread_id"]}
    assert "dropped 0 checkpoint thread(s)" in await sweep()  # a waiting pause is kept
    response = await api.call("POST", "/sessions/b1/turns", {"resume": {"action": "reject", "reason": "no"}})
    assert response.status_code == 200, response.content
    assert await orm(rows, session_id=paused.id) == 0


async def test_rewinding_past_a_pause_drops_it(api, script):
    body = await pause_booking(api, "b1")
    paused = await orm(session, key="b1")
    response = await api.call("POST", "/sessions/b1/rewind", {"turn_id": None, "expected_version": body["version"]})
    assert response.status_code == 200, response.content
    assert await orm(rows, session_id=paused.id) == 0
    assert (await orm(session, key="b1")).interrupt is None


async def test_sweep_drops_a_run_s_leftovers_and_keeps_running_ones(api, script, settings):
    """A run that persisted a pause and then failed to commit leaves its
    thread behind; the sweep removes it and nothing that is still needed."""
    from turns_app.graph_step import run_graph

    await pause_booking(api, "keep-paused")
    kept = await orm(session, key="keep-paused")
    await orm(lambda: AgentSession.objects.create(owner="alice", key="b2", graph="booking"))
    lost = await claim_turn("b2", "Book a table for 2 on 2031-05-01 at 19:30, my name is Ada Lovelace")

    async def ignore(event, data):
        return None

    outcome = await run_graph(lost, ignore)  # paused and persisted...
    assert outcome.interrupts and await orm(threads, session_id=lost.session_id) == {lost.thread_id}
    assert "dropped 0 checkpoint thread(s)" in await sweep()  # ...its turn still runs
    await orm(lambda: AgentTurn.objects.filter(pk=lost.turn_id).update(status="aborted"))  # ...and never commits
    assert "dropped 1 checkpoint thread(s)" in await sweep()
    assert await orm(threads, session_id=lost.session_id) == set()
    assert await orm(threads, session_id=kept.id) == {kept.interrupt["thread_id"]}


async def test_sweep_aborts_turns_whose_lease_ran_out(api, script, settings):
    """On PostgreSQL nobody restarts: a dead process's turn would stay
    `pending` until the next claim on its session. The sweep ends it."""
    settings.AGENT_TURN_LEASE_SECONDS = 0.1
    await api.chat("s1", "hello")
    dead = await claim_turn("s1", "lost")
    live = await claim_turn("other", "running")
    # The other session's turn is alive: its lease reaches well past the sweep.
    later = timezone.now() + timedelta(seconds=30)
    await orm(lambda: AgentSession.objects.filter(key="other").update(lease_expires_at=later))
    await asyncio.sleep(0.2)  # the first turn's 0.1 s lease runs out
    assert "aborted 1 turn(s)" in await sweep()
    statuses = await orm(lambda: {t.id: (t.status, (t.error or {}).get("code")) for t in AgentTurn.objects.all()})
    assert statuses[dead.turn_id] == ("aborted", "lease_expired")
    assert statuses[live.turn_id] == ("pending", None)  # a live lease is left alone
    assert (await orm(session, key="s1")).active_turn_id is None
