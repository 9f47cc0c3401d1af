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
