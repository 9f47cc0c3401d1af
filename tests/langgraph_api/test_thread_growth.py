"""A run's answer does not cost more as its thread grows (docs/scale.md,
"The hot path"): every `runs.wait` and join answers the state after its run
(`threads.turn_values`), which read every finished turn of the thread and
its whole conversation from the database, so a 200-run thread answered
each run ~2.5× slower than a new one. Now it reads the one turn, and the
conversation from this process's cache of it: the rows read at turn 30 are
the rows read at turn 5, and the answer is the one the full read gives."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.backends.utils import CursorWrapper

from core.asyncdb import db
from langgraph_app import threads
from sessions_app.models import AgentSession
from tests.fixtures.api import Api
from turns_app import history

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rows_read(monkeypatch) -> list[int]:
    """Rows the database handed back, as one counter (both databases)."""
    counted = [0]

    def counting(name: str):
        def fetch(self: CursorWrapper, *args: Any):
            with self.db.wrap_database_errors:
                got = getattr(self.cursor, name)(*args)
            counted[0] += (got is not None) if name == "fetchone" else len(got)
            return got

        return fetch

    for name in ("fetchone", "fetchmany", "fetchall"):
        monkeypatch.setattr(CursorWrapper, name, counting(name), raising=False)
    return counted


async def rows_for_last_run(key: str, rows_read: list[int]) -> tuple[int, dict[str, Any], dict[str, Any]]:
    session = await AgentSession.objects.aget(owner="alice", key=key)
    before = rows_read[0]
    values = await db(threads.turn_values, owner="alice", key=key, turn_id=session.head_turn_id)
    read = rows_read[0] - before
    # The full read, as the thread's state endpoints build it.
    state = await db(threads.thread_state, owner="alice", key=key)
    return read, values, state["values"]


async def test_a_runs_answer_reads_the_same_rows_at_turn_30_as_at_turn_5(alice, rows_read):
    chat = Api(alice)
    read: dict[int, int] = {}
    for n in range(1, 31):
        response = await chat.chat("growing", f"message {n}")
        assert response.status_code == 200, response.content
        if n in (5, 30):
            read[n], values, full = await rows_for_last_run("growing", rows_read)
            assert values == full
            assert len(values["messages"]) == 2 * n
    assert read[30] == read[5], read
    assert read[5] <= 3, read  # the session, the turn (and nothing per turn)

    # Another process committed it, or the cache let it go: read from the
    # turns, the same answer.
    session = await AgentSession.objects.aget(owner="alice", key="growing")
    history.cache().forget(session.id)
    _, values, full = await rows_for_last_run("growing", rows_read)
    assert values == full and len(values["messages"]) == 60
