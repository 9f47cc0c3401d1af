"""Thread-stream commands in-process (docs/agent-protocol.md, "Thread
streams"): a run of a graph compiled without LangGraph's UpdatesTransformer
pauses at its interrupt as one with it does (`input.requested`, then
`interrupted`), and `input.respond` resumes it. Against real daphne and the
SDK: test_thread_stream.py and LangGraph's suite (tests/vendor)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import AsyncClient

from tests.fixtures.runners import orm
from tests.turns_app.test_sse_consumer import Stream
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

GRAPHS = {
    "breakpoint": "tests.fixtures.graphs:build_breakpoint_graph",
    "intake": "graphs.intake.graph:build_intake_graph",
    "config_ask": "tests.fixtures.graphs:build_config_ask_graph",
}
TERMINAL = ("completed", "interrupted", "failed")


@pytest.fixture(scope="module")
def app():
    from agentsite.routing import build_application

    return build_application()


@pytest.fixture
def graphs(settings):
    settings.AGENT_GRAPHS = dict(GRAPHS)


class Protocol:
    """/langgraph/'s JSON endpoints, in-process, with a key."""

    def __init__(self, key: str) -> None:
        self.client, self.headers = AsyncClient(), {"Authorization": f"Bearer {key}"}

    async def call(self, method: str, path: str, body: Any = None):
        fn = getattr(self.client, method.lower())
        kwargs: dict[str, Any] = {"headers": self.headers}
        if body is not None:
            kwargs.update(data=body, content_type="application/json")
        return await fn(f"/langgraph{path}", **kwargs)

    async def command(self, thread: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = await self.call("POST", f"/threads/{thread}/commands", {"id": 1, "method": method, "params": params})
        assert response.status_code == 200, response.content
        answer = json.loads(response.content)
        assert answer["type"] == "success", answer
        return answer["result"]


async def newest_run_events(app, key: str, thread: str) -> list[dict[str, Any]]:
    """The thread stream's events of its newest run, up to the root's end."""
    stream = Stream(
        app,
        "POST",
        f"/langgraph/threads/{thread}/stream/events",
        key=key,
        body={"channels": ["lifecycle", "input", "values"]},
    )
    await stream.start()
    assert stream.status == 200
    got: list[dict[str, Any]] = []
    try:
        while (event := await stream.next_event()) is not None:
            got.append(json.loads(event.data))
            params = got[-1]["params"]
            if got[-1]["method"] == "lifecycle" and not params["namespace"] and params["data"]["event"] in TERMINAL:
                return got
    finally:
        await stream.disconnect()
    raise AssertionError(f"the stream ended before the run did: {got}")


def root_lifecycle(events: list[dict[str, Any]]) -> list[str]:
    return [e["params"]["data"]["event"] for e in events if e["method"] == "lifecycle" and not e["params"]["namespace"]]


def turn_statuses(thread: str) -> list[str]:
    return list(AgentTurn.objects.filter(session__key=thread).order_by("number").values_list("status", flat=True))


async def test_a_graph_without_the_updates_transformer_pauses_and_input_respond_resumes_it(app, alice, graphs):
    client, thread = Protocol(alice), "0c6f3a52-3c1e-4f51-9d55-6f3b3a0d0c21"
    await client.command(thread, "run.start", {"assistant_id": "config_ask", "input": {"messages": []}})
    paused = await newest_run_events(app, alice, thread)
    assert root_lifecycle(paused) == ["running", "interrupted"], paused
    (asked,) = [e["params"]["data"] for e in paused if e["method"] == "input.requested"]
    assert asked["payload"] == "ok?" and asked["interrupt_id"]
    assert await orm(turn_statuses, thread=thread) == ["interrupted"]
    state = json.loads((await client.call("GET", f"/threads/{thread}/state")).content)
    assert [i["id"] for i in state["interrupts"]] == [asked["interrupt_id"]]

    await client.command(thread, "input.respond", {"interrupt_id": asked["interrupt_id"], "response": "yes"})
    resumed = await newest_run_events(app, alice, thread)
    assert root_lifecycle(resumed) == ["running", "completed"], resumed
    assert await orm(turn_statuses, thread=thread) == ["interrupted", "committed"]
    state = json.loads((await client.call("GET", f"/threads/{thread}/state")).content)
    assert state["values"]["messages"][-1]["content"] == "yes|You are helpful.|-"
    assert state["interrupts"] == [] and state["next"] == []


async def test_a_breakpoint_compiled_into_such_a_graph_pauses_and_a_run_without_input_goes_on(app, alice, graphs):
    client, thread = Protocol(alice), "0c6f3a52-3c1e-4f51-9d55-6f3b3a0d0c22"
    await client.command(thread, "run.start", {"assistant_id": "breakpoint", "input": {"messages": []}})
    paused = await newest_run_events(app, alice, thread)
    assert root_lifecycle(paused) == ["running", "interrupted"], paused
    assert not [e for e in paused if e["method"] == "input.requested"]  # a breakpoint has no interrupt value
    state = json.loads((await client.call("GET", f"/threads/{thread}/state")).content)
    assert state["next"] == ["second"]
    await client.command(thread, "run.start", {"assistant_id": "breakpoint"})
    assert root_lifecycle(await newest_run_events(app, alice, thread)) == ["running", "completed"]
    state = json.loads((await client.call("GET", f"/threads/{thread}/state")).content)
    assert state["next"] == [] and state["values"]["messages"][-1]["content"] == "second"


async def test_input_respond_resumes_with_the_threads_own_assistant(app, alice, graphs):
    client, thread = Protocol(alice), "0c6f3a52-3c1e-4f51-9d55-6f3b3a0d0c23"
    made = await client.call(
        "POST",
        "/assistants",
        {
            "graph_id": "config_ask",
            "config": {"configurable": {"tone": "dry"}},
            "context": {"system_prompt": "Be brief."},
        },
    )
    assert made.status_code == 200, made.content
    assistant = json.loads(made.content)["assistant_id"]
    await client.command(thread, "run.start", {"assistant_id": assistant, "input": {"messages": []}})
    (asked,) = [
        e["params"]["data"] for e in await newest_run_events(app, alice, thread) if e["method"] == "input.requested"
    ]
    await client.command(thread, "input.respond", {"interrupt_id": asked["interrupt_id"], "response": "yes"})
    assert root_lifecycle(await newest_run_events(app, alice, thread)) == ["running", "completed"]
    state = json.loads((await client.call("GET", f"/threads/{thread}/state")).content)
    # The resumed run was handed the assistant's context and config, as a run of it would be.
    assert state["values"]["messages"][-1]["content"] == "yes|Be brief.|dry"
    runs = json.loads((await client.call("GET", f"/threads/{thread}/runs")).content)
    assert [r["assistant_id"] for r in runs] == [assistant, assistant]
