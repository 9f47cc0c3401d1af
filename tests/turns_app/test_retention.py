"""After each commit only the last AGENT_CHECKPOINT_KEEP committed
checkpoints of a session stay, so checkpoint storage grows with the
conversation, not with its square (bench/storage_growth.py measures it)."""

from __future__ import annotations

import pytest
from django.db import connection

from agentsite.agent.checkpointer import checkpoint_tables
from sessions_app.models import AgentSession
from tests.conftest import orm
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

    from turns_app.graph_run import run_graph
    from turns_app.protocol import turn_claim

    await api.chat("keep-me", "hello")
    await api.chat("s1", "hello")
    zombie = await orm(
        turn_claim,
        owner="alice",
        key="s1",
        request={"text": "late", "client_mode": "chat", "need_form_update": True},
        idempotency_key=None,
    )
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
