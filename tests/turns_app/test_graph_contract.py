"""Bring your own graph (docs/graphs.md, "Bring your own graph"): any compiled graph with a `messages`
channel runs under the turn protocol, registered by dotted path; fields are
for graphs that have them; streaming comes from any node; tools stream their
calls and results."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from graphs.runtime.registry import build_graph, check_registry
from tests.fixtures.runners import orm
from tests.fixtures.turns import transcript_of
from tests.turns_app.test_sse_consumer import json_error, names, post, stream_events
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

TEST_GRAPHS = {
    "intake": "graphs.intake.graph:build_intake_graph",
    "booking": "graphs.booking.graph:build_booking_graph",
    "echo": "tests.fixtures.graphs:build_echo_graph",
    "fixed": "tests.fixtures.graphs:fixed_graph",
}


@pytest.fixture
def graphs(settings):
    settings.AGENT_GRAPHS = dict(TEST_GRAPHS)
    return settings


@pytest.fixture(scope="module")
def app():
    from agentsite.routing import build_application

    return build_application()


def body(response) -> dict:
    return json.loads(response.content)


def session(key: str):
    from sessions_app.models import AgentSession

    return AgentSession.objects.get(key=key)


def turns(key: str) -> list[AgentTurn]:
    return list(AgentTurn.objects.filter(session__key=key).order_by("number"))


async def test_graphs_are_listed_with_their_schemas(api, graphs):
    response = await api.call("GET", "/graphs")
    assert response.status_code == 200, response.content
    listed = {g["name"]: g for g in body(response)}
    assert list(listed) == list(TEST_GRAPHS)
    assert listed["intake"]["fields"] is True and listed["echo"]["fields"] is False
    for graph in listed.values():
        assert "messages" in graph["input_schema"]["properties"], graph["name"]
        assert "messages" in graph["state_schema"]["properties"], graph["name"]
    assert "turns_seen" in listed["echo"]["state_schema"]["properties"]
    assert listed["booking"]["description"].startswith("Books restaurant tables")


async def test_a_graph_of_your_own_runs_under_the_turn_protocol(api, graphs, app, alice):
    assert (await api.call("POST", "/sessions", {"key": "e1", "graph": "echo"})).status_code == 201
    first = body(await api.chat("e1", "hello", idem="k-1"))
    assert first["status"] == "committed" and first["reply"] == "I can only help with filling in a form."
    # No fields channel: the session's fields are not the graph's business.
    assert first["fields"] == {} and first["field_changes"] == {}
    events = await stream_events(post(app, alice, "e1", "again"))
    assert names(events)[0] == "turn" and names(events)[-1] == "done"
    assert "fields" not in names(events) and names(events).count("delta") > 1  # streamed from its node
    # Its other channels are carried from turn to turn.
    assert [t.values for t in await orm(turns, key="e1")] == [{"turns_seen": 1}, {"turns_seen": 2}]
    # Replays and fencing are the protocol's, whatever the graph.
    replay = await api.chat("e1", "hello", idem="k-1")
    assert replay.headers["Idempotent-Replayed"] == "true" and body(replay) == first
    messages = await orm(transcript_of, session=await orm(session, key="e1"))
    assert [m["role"] for m in messages] == ["user", "assistant"] * 2


async def test_a_compiled_graph_is_registered_as_it_is(api, graphs):
    assert (await api.call("POST", "/sessions", {"key": "f1", "graph": "fixed"})).status_code == 201
    assert body(await api.chat("f1", "ping"))["reply"] == "you said: ping"


async def test_graph_names_and_the_contract_are_checked(api, graphs, settings):
    unknown = await api.call("POST", "/sessions", {"key": "x", "graph": "nope"})
    assert unknown.status_code == 422 and body(unknown)["error"]["code"] == "unknown_graph"
    # A graph without `messages` is registered: it runs under /langgraph/
    # only, its input its own channels (docs/graphs.md, "Bring your own graph").
    settings.AGENT_GRAPHS = {**TEST_GRAPHS, "plain": "tests.fixtures.graphs:build_graph_without_messages"}
    assert "messages" not in build_graph("plain", checkpointer=None).channels
    check_registry()  # what start-up runs
    settings.AGENT_GRAPHS = {**TEST_GRAPHS, "missing": "tests.fixtures.graphs:no_such_thing"}
    with pytest.raises(ImproperlyConfigured, match="cannot be imported"):
        check_registry()


def sessions_and_turns() -> tuple[list[str], int]:
    from sessions_app.models import AgentSession

    return sorted(AgentSession.objects.values_list("key", flat=True)), AgentTurn.objects.count()


async def test_an_api_turn_on_a_graph_without_messages_is_refused_before_anything_is_claimed(api, graphs, app, alice):
    graphs.AGENT_GRAPHS = {**TEST_GRAPHS, "plain": "tests.fixtures.graphs:build_graph_without_messages"}
    # The session is shared with /langgraph/, where such a graph is valid.
    assert (await api.call("POST", "/sessions", {"key": "p1", "graph": "plain"})).status_code == 201
    refused = await api.chat("p1", "hello", idem="k-1")
    assert refused.status_code == 409, refused.content
    assert body(refused)["error"]["code"] == "graph_without_messages"
    assert body(refused)["error"]["details"] == {"graph": "plain"}
    await json_error(post(app, alice, "p1", "hello"), 409, "graph_without_messages")
    # A new session's first turn on such a default graph: not even the session is made.
    graphs.AGENT_GRAPH = "plain"
    await json_error(post(app, alice, "p2", "hello"), 409, "graph_without_messages")
    assert (await api.chat("p3", "hello")).status_code == 409
    assert await orm(sessions_and_turns) == (["p1"], 0)
    held = await orm(session, key="p1")
    assert (held.version, held.active_turn_id) == (0, None)
    # Under /langgraph/ the same session runs, its input its own channels.
    run = await api.client.post(
        "/langgraph/threads/p1/runs/wait",
        data={"assistant_id": "plain", "input": {"count": 0}},
        content_type="application/json",
        headers={"Authorization": f"Bearer {alice}"},
    )
    assert run.status_code == 200 and body(run)["count"] == 1, run.content


async def test_a_session_keeps_its_graph_for_its_epoch(api, graphs):
    assert (await api.call("POST", "/sessions", {"key": "s1", "graph": "echo"})).status_code == 201
    await api.chat("s1", "hello")
    info = body(await api.call("GET", "/sessions/s1"))
    assert info["graph"] == "echo"
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    # A new epoch may choose another graph.
    assert (await api.call("POST", "/sessions", {"key": "s1", "graph": "fixed"})).status_code == 201
    assert body(await api.chat("s1", "ping"))["reply"] == "you said: ping"


async def test_tool_calls_and_results_stream(app, api, alice):
    assert (await api.call("POST", "/sessions", {"key": "b1", "graph": "booking"})).status_code == 201
    events = await stream_events(
        post(app, alice, "b1", "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace")
    )
    assert names(events) == ["turn", "tool_call", "tool_result", "tool_call", "interrupt", "done"]
    first_call, result, booking_call, interrupt = (e.json for e in events[1:5])
    assert (first_call["name"], first_call["args"]) == (
        "check_availability",
        {"date": "2031-05-01", "time": "19:30", "party_size": 2},
    )
    assert result["tool_call_id"] == first_call["id"] and json.loads(result["content"])["available"] is True
    assert booking_call["name"] == "book_table" and booking_call["args"]["name"] == "Ada Lovelace"
    (asked,) = interrupt["value"]["action_requests"]
    assert (asked["name"], asked["args"]) == ("book_table", booking_call["args"])
    assert events[-1].json["status"] == "interrupted" and events[-1].json["interrupts"] == [interrupt]
