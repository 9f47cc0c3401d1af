"""What a protocol run costs the database (docs/scale.md, "Round trips"),
pinned as tests/turns_app/test_hot_path.py pins the claim and the commit:
the statements a `runs.wait` on a thread sends, through the whole ASGI
application, on both databases. Each is a round trip, and PostgreSQL's
CPU per run under the SDK's 20 × 20 load follows their count."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

from agentsite.routing import build_application
from tests.api.test_edge import call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def app():
    return build_application()


@pytest.fixture
def sent(monkeypatch) -> list[str]:
    """Every statement any thread's connection sent (the first word of
    each), and "COMMIT" for each transaction committed."""
    seen: list[str] = []
    # Django's private steps under every execute and commit (not in django-stubs).
    execute = CursorWrapper._execute  # type: ignore[attr-defined]
    executemany = CursorWrapper._executemany  # type: ignore[attr-defined]
    commit = BaseDatabaseWrapper._commit  # type: ignore[attr-defined]

    def counting_execute(self, sql, *args: Any):
        seen.append(sql.split()[0])
        return execute(self, sql, *args)

    def counting_executemany(self, sql, *args: Any):
        seen.append(sql.split()[0])
        return executemany(self, sql, *args)

    def counting_commit(self):
        seen.append("COMMIT")
        return commit(self)

    monkeypatch.setattr(CursorWrapper, "_execute", counting_execute)
    monkeypatch.setattr(CursorWrapper, "_executemany", counting_executemany)
    monkeypatch.setattr(BaseDatabaseWrapper, "_commit", counting_commit)
    return seen


async def run_on(app, key: str, thread_id: str, text: str) -> None:
    body = {"assistant_id": "echo", "input": {"messages": [{"role": "user", "content": text}]}}
    waited = await call(
        app,
        "POST",
        f"/langgraph/threads/{thread_id}/runs/wait",
        chunks=[json.dumps(body).encode()],
        headers={"x-api-key": key, "content-type": "application/json"},
    )
    assert waited.status == 200, waited.body
    assert waited.json["messages"][-1]["type"] == "ai", waited.body


async def test_a_run_on_a_thread_sends_six_statements_in_one_transaction(app, alice, sent, settings):
    # A graph that writes no events of its own while it runs (the bench's chat graph is one).
    settings.AGENT_GRAPHS = {**settings.AGENT_GRAPHS, "echo": "tests.fixtures.graphs:build_echo_graph"}
    headers = {"x-api-key": alice, "content-type": "application/json"}
    thread = await call(app, "POST", "/langgraph/threads", chunks=[b"{}"], headers=headers)
    assert thread.status == 200, thread.body
    thread_id = thread.json["thread_id"]
    await run_on(app, alice, thread_id, "first")
    sent.clear()
    await run_on(app, alice, thread_id, "second")
    # The thread read (is it there, does it carry the assistant's stamp:
    # it does, so no merge of its metadata follows); the claim: the session
    # locked, the head's values and the last number read, the turn and its
    # first event inserted (one query on PostgreSQL), committed; the commit,
    # one statement fenced in itself; the answer, the turn read with its
    # session. SQLite runs each statement of a batch on its own.
    if connection.vendor == "postgresql":
        assert sent == ["SELECT", "SELECT", "SELECT", "SET", "COMMIT", "UPDATE", "SELECT"], sent
    else:
        claim = ["BEGIN", "SELECT", "SELECT", "INSERT", "INSERT", "UPDATE", "COMMIT"]
        commit = ["BEGIN", "UPDATE", "UPDATE", "INSERT", "COMMIT"]
        assert sent == ["SELECT", *claim, *commit, "SELECT"], sent


async def test_a_run_of_a_system_assistant_resolves_it_and_its_graph_without_a_thread_hop(app, alice, monkeypatch):
    """A graph's system assistant and the graph's shape are known without a
    read (the shape since start-up): neither costs a run a hop to a
    database thread (docs/scale.md, "CPU")."""
    from langgraph_app import runs

    hops: list[str] = []
    real = runs.db

    async def counting(fn, *args: Any, **kwargs: Any):
        hops.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(runs, "db", counting)
    headers = {"x-api-key": alice, "content-type": "application/json"}
    thread = await call(app, "POST", "/langgraph/threads", chunks=[b"{}"], headers=headers)
    assert thread.status == 200, thread.body
    body = {"assistant_id": settings.AGENT_GRAPH, "input": {"messages": [{"role": "user", "content": "Ada"}]}}
    waited = await call(
        app,
        "POST",
        f"/langgraph/threads/{thread.json['thread_id']}/runs/wait",
        chunks=[json.dumps(body).encode()],
        headers=headers,
    )
    assert waited.status == 200, waited.body
    assert "resolve" not in hops and "shape_for" not in hops, hops
    assert hops, "the counter counts"
