"""A protocol run's `values` events in the event log (docs/storage.md, "Event
log"): the conversation the run started from is stored by reference, so a
run's rows grow with what it adds, not with the thread; and the values
events a client gets, live or re-read from the log, are still what the
graph produced."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import pytest
from django.db import connection

from agentsite.routing import build_application
from core.database import is_postgres
from sessions_app.models import AgentSession
from tests.fixtures.api import Api
from tests.fixtures.runners import orm
from tests.turns_app.test_sse_consumer import Stream
from turns_app import history, selectors, stream_parts
from turns_app.models import AgentTurn, AgentTurnEvent
from turns_app.native_json import dumps

pytestmark = pytest.mark.django_db(transaction=True)

SHORT, LONG = 2, 14


@pytest.fixture(scope="module")
def app():
    return build_application()


@pytest.fixture
def produced(monkeypatch) -> list[str]:
    """The values events the graph produced, as LangGraph's server writes them."""
    seen: list[str] = []
    real = stream_parts.NativeParts.log

    async def log(self, part):
        if part["type"] == "values" and "values" in self.events and not part.get("interrupts"):
            seen.append(dumps(part["data"]))
        await real(self, part)

    monkeypatch.setattr(stream_parts.NativeParts, "log", log)
    return seen


async def thread_of(alice: str, key: str, turns: int) -> None:
    chat = Api(alice)
    for n in range(turns):
        response = await chat.chat(key, f"message {n:02d}: something about the weather")
        assert response.status_code == 200, response.content


async def values_run(app, alice: str, key: str, **body: Any) -> tuple[str, list[str]]:
    """A stream_mode=values run: its id and the values events' data as streamed."""
    body = body or {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "one more"}]}}
    stream = Stream(app, "POST", f"/langgraph/threads/{key}/runs/stream", key=alice, body=body)
    await stream.start()
    assert stream.status == 200
    events = await stream.events()
    assert events[-1].event == "end", events[-1]
    run_id = json.loads(events[0].data)["run_id"]
    return run_id, [e.data for e in events if e.event == "values"]


def assert_as_produced(read: list[str], produced: list[str]) -> None:
    """Read back from the log: the same JSON as the graph produced, byte
    for byte where the database keeps an object's key order (PostgreSQL's
    jsonb does not, inside the committed messages a reference names)."""
    assert [json.loads(d) for d in read] == [json.loads(d) for d in produced]
    if not is_postgres(connection.settings_dict):
        assert read == produced


def stored_values(run_id: str) -> list[str]:
    rows = AgentTurnEvent.objects.filter(turn_id=UUID(run_id), event="values").order_by("seq")
    return [r.data for r in rows]


async def test_a_values_runs_log_grows_with_what_it_adds_not_with_the_thread(app, alice, produced):
    await thread_of(alice, "short", SHORT)
    await thread_of(alice, "long", LONG)
    short_run, short_sent = await values_run(app, alice, "short")
    long_run, long_sent = await values_run(app, alice, "long")
    short_rows = sum(len(d) for d in await orm(stored_values, run_id=short_run))
    long_rows = sum(len(d) for d in await orm(stored_values, run_id=long_run))
    sent_growth = sum(map(len, long_sent)) - sum(map(len, short_sent))
    assert sent_growth > 3 * short_rows  # what is sent repeats the whole conversation…
    # …what is stored does not: the same run on a thread seven times longer
    # stores what it added, and how many messages of the thread it names.
    assert abs(long_rows - short_rows) < sent_growth / 10
    assert all('{"$base":' in d for d in await orm(stored_values, run_id=long_run))


@pytest.mark.parametrize("cache", ["warm", "cold"])
async def test_values_events_are_as_the_graph_produced_them(app, alice, produced, cache, monkeypatch):
    await thread_of(alice, "t", 3)
    if cache == "cold":  # the run's conversation is read from the turns: other objects than the cache's
        monkeypatch.setattr(history.ConversationCache, "get", lambda self, session_id, head_turn_id: None)
    run_id, live = await values_run(app, alice, "t")
    assert live == produced and len(live) >= 2
    turn = await orm(AgentTurn.objects.get, pk=run_id)
    session = await orm(AgentSession.objects.get, key="t")
    assert turn.parent_id is not None and turn.parent_id != session.head_turn_id  # it had a conversation
    assert all('{"$base":' in d for d in await orm(stored_values, run_id=run_id))
    logged = await orm(selectors.turn_events_after, turn_id=run_id, after=0)
    assert_as_produced([e.data for e in logged.events if e.event == "values"], produced)
    # Joined after the run ended: the stream comes from the table.
    join = Stream(app, "GET", f"/langgraph/threads/t/runs/{run_id}/stream?stream_mode=values", key=alice)
    await join.start()
    assert_as_produced([e.data for e in await join.events() if e.event == "values"], produced)


async def test_a_resume_stores_what_its_checkpoint_holds_of_the_thread_by_reference(app, alice, produced):
    created = await Api(None).client.post(
        "/langgraph/threads",
        data={"thread_id": "b", "metadata": {"graph_id": "booking"}},
        content_type="application/json",
        headers={"x-api-key": alice},
    )
    assert created.status_code == 200, created.content
    booking = {"role": "user", "content": "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace"}
    await values_run(app, alice, "b", assistant_id="booking", input={"messages": [booking]})
    produced.clear()
    run_id, live = await values_run(app, alice, "b", assistant_id="booking", command={"resume": {"action": "approve"}})
    assert live == produced and produced
    stored = await orm(stored_values, run_id=run_id)
    assert stored and all('{"$base":' in d for d in stored)
    assert sum(map(len, stored)) < sum(map(len, live))
    logged = await orm(selectors.turn_events_after, turn_id=run_id, after=0)
    assert_as_produced([e.data for e in logged.events if e.event == "values"], produced)


def test_a_stored_value_names_its_conversation_only_when_it_starts_with_it():
    whole: dict[str, Any] = {"messages": [{"type": "human", "content": "hi"}], "other": {"$base": 3}}
    assert stream_parts.by_reference(dumps(whole)) == 0
    tricky = dumps({"messages": [{"type": "human", "content": '{"$base": 2}'}]})
    assert stream_parts.by_reference(tricky) == 0
    by_ref = dumps({"stage": "x", "messages": [{"$base": 2}, {"type": "ai", "content": "new"}]})
    assert stream_parts.by_reference(by_ref) == 2
    base = [{"type": "human", "content": "a"}, {"type": "ai", "content": "b"}, {"type": "human", "content": "c"}]
    assert stream_parts.expanded(by_ref, base) == dumps(
        {"stage": "x", "messages": [*base[:2], {"type": "ai", "content": "new"}]}
    )
