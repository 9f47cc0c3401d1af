"""After each commit only the last AGENT_CHECKPOINT_KEEP committed
checkpoints of a session stay, so checkpoint storage grows with the
conversation, not with its square (bench/storage_growth.py measures it)."""

from __future__ import annotations

import pytest
from django.db import connection

from turns_app.checkpoints import checkpoint_tables
from sessions_app.models import AgentSession
from tests.conftest import claim_turn, orm
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)


def rows_by_table(session_id) -> dict[str, int]:
    counts = {}
    with connection.cursor() as cursor:
        for table in checkpoint_tables():
            cursor.execute(
                f"SELECT count(*) FROM {connection.ops.quote_name(table)} WHERE thread_id LIKE %s",
                [f"{session_id}:%"],
            )
            counts[table] = cursor.fetchone()[0]
    return counts


def kept_threads(session_id) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE %s", [f"{session_id}:%"])
        return {row[0] for row in cursor.fetchall()}


def committed_threads(session: AgentSession, last: int) -> set[str]:
    turns = AgentTurn.objects.filter(session=session, status="committed").order_by("-number")[:last]
    return {t.checkpoint_thread for t in turns}


@pytest.mark.parametrize("keep", [1, 3])
async def test_only_the_last_committed_checkpoints_stay(api, script, settings, keep):
    settings.AGENT_CHECKPOINT_KEEP = keep
    for i in range(8):
        assert (await api.chat("s1", f"message {i}")).status_code == 200
        if i == 4:  # an aborted turn in between leaves nothing behind either
            script.fail["reply"] = RuntimeError("boom")
            assert (await api.chat("s1", "lost")).status_code == 502
            del script.fail["reply"]
    session = await orm(lambda: AgentSession.objects.get(key="s1"))
    counts = await orm(rows_by_table, session_id=session.id)
    assert counts["checkpoints"] == keep  # durability="exit": one checkpoint per turn
    assert await orm(kept_threads, session_id=session.id) == await orm(
        committed_threads, session=session, last=keep
    )
    assert session.checkpoint_thread in await orm(kept_threads, session_id=session.id)
    if "checkpoint_blobs" in counts:
        # Blobs of dropped threads go with them: only the kept threads' remain.
        with_blobs = await orm(
            lambda: _blob_threads(session.id)
        )
        assert with_blobs <= await orm(kept_threads, session_id=session.id)


def _blob_threads(session_id) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT thread_id FROM checkpoint_blobs WHERE thread_id LIKE %s", [f"{session_id}:%"]
        )
        return {row[0] for row in cursor.fetchall()}


async def test_sweep_drops_late_writes_of_a_deleted_epoch(api, script):
    """A run still writing after its session was deleted lands in a thread
    nobody reads; `manage.py sweep_checkpoints` removes it and nothing else."""
    from io import StringIO

    from django.core.management import call_command

    from turns_app.graph_step import run_graph
    await api.chat("keep-me", "hello")
    await api.chat("s1", "hello")
    zombie = await claim_turn("s1", "late")
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204

    async def ignore(event, data):
        return None

    await run_graph(zombie, ignore)  # the late write, after the purge
    deleted = await orm(lambda: AgentSession.objects.get(key="s1"))
    live = await orm(lambda: AgentSession.objects.get(key="keep-me"))
    assert await orm(kept_threads, session_id=deleted.id) == {zombie.thread_id}
    before_live = await orm(kept_threads, session_id=live.id)

    out = StringIO()
    await orm(call_command, command_name="sweep_checkpoints", stdout=out)
    assert "dropped 1 checkpoint thread(s)" in out.getvalue()
    assert await orm(kept_threads, session_id=deleted.id) == set()
    assert await orm(kept_threads, session_id=live.id) == before_live == {live.checkpoint_thread}


async def test_sweep_aborts_turns_whose_lease_ran_out(api, script, settings):
    """On PostgreSQL nobody restarts: a dead process's turn would stay
    `pending` until the next claim on its session. The sweep ends it."""
    import asyncio
    from datetime import timedelta
    from io import StringIO

    from django.core.management import call_command
    from django.utils import timezone

    from turns_app.graph_step import run_graph
    settings.AGENT_TURN_LEASE_SECONDS = 0.1
    await api.chat("s1", "hello")
    dead = await claim_turn("s1", "lost")

    async def ignore(event, data):
        return None

    await run_graph(dead, ignore)  # its process "dies" here
    live = await claim_turn("other", "running")
    # The other session's turn is alive: its lease reaches well past the sweep.
    later = timezone.now() + timedelta(seconds=30)
    await orm(lambda: AgentSession.objects.filter(key="other").update(lease_expires_at=later))
    await asyncio.sleep(0.2)  # the first turn's 0.1 s lease runs out
    out = StringIO()
    await orm(call_command, command_name="sweep_checkpoints", stdout=out)
    assert "aborted 1 turn(s)" in out.getvalue()
    statuses = await orm(lambda: {t.id: (t.status, (t.error or {}).get("code")) for t in AgentTurn.objects.all()})
    assert statuses[dead.turn_id] == ("aborted", "lease_expired")
    assert statuses[live.turn_id] == ("pending", None)  # a live lease is left alone
    session = await orm(lambda: AgentSession.objects.get(key="s1"))
    assert session.active_turn_id is None
    # Its checkpoint thread goes with the same sweep (the turn is aborted now).
    assert dead.thread_id not in await orm(kept_threads, session_id=session.id)
