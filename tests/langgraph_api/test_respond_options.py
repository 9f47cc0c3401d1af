"""What a run is asked besides its input, as LangGraph's server takes it,
through the unmodified `langgraph_sdk` against a real daphne on the suite's
database (docs/agent-protocol.md, "Thread streams"): `input.respond`
forwards the command's `update` and `goto` into the resume's Command and
its `config` and `metadata` to the run, as LangGraph's server does — the
resumed run ends as bare LangGraph's does with the same Command — and
refuses bad ones as a run would, running nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_sdk import get_client

from tests.fixtures.graphs import build_respond_graph
from tests.fixtures.runners import orm
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 90
GRAPHS = "respond=tests.fixtures.graphs:build_respond_graph,steps=tests.fixtures.graphs:build_steps_graph"


def langgraph_values(values: dict[str, Any]) -> dict[str, Any]:
    """A thread's values as LangGraph's own: ours always carry `messages`, empty for a graph without them."""
    assert values.get("messages", []) == []
    return {k: v for k, v in values.items() if k != "messages"}


def bare_langgraph(first: dict[str, Any], resume: Command, config: dict[str, Any]) -> dict[str, Any]:
    """The respond graph's final values in LangGraph itself: run to its pause, then resumed with `resume`."""
    graph = build_respond_graph(model=None, checkpointer=InMemorySaver())
    graph.invoke(first, {"configurable": {"thread_id": "bare"}})
    configurable = {**config.get("configurable", {}), "thread_id": "bare"}
    graph.invoke(resume, {**config, "configurable": configurable})
    return dict(graph.get_state({"configurable": {"thread_id": "bare"}}).values)


async def paused(thread: Any) -> dict[str, Any]:
    """Starts the respond graph on the SDK's thread stream; its one interrupt, once it pauses."""
    await thread.run.start(input={"log": []}, config={"configurable": {"tone": "first"}})
    async for _ in thread.values:  # the SDK ends it at the pause
        pass
    assert thread.interrupted
    (pending,) = thread.interrupts
    return {"interrupt_id": pending["interrupt_id"], "namespace": pending["namespace"]}


async def input_respond_forwards_update_goto_config_and_metadata(url: str, key: str) -> None:
    client: Any = get_client(url=url, api_key=key)
    async with client.threads.stream(assistant_id="respond") as thread:
        pending = await paused(thread)
        extras = {
            "update": {"note": "n"},
            "goto": "quiet",
            "config": {"configurable": {"tone": "dry"}},
            "metadata": {"by": "respond-test"},
        }
        # The SDK's respond() sends the answer alone; the rest goes through
        # its own command channel, as LangGraph's JS client sends it.
        assert await thread._send_command("input.respond", {**pending, "response": "yes", **extras}) == {}
        final = await thread.output
    expected = bare_langgraph(
        {"log": []}, Command(resume="yes", update={"note": "n"}, goto="quiet"), {"configurable": {"tone": "dry"}}
    )
    # The update landed before the resumed node ran; the goto ran beside it.
    assert langgraph_values(final) == expected == {"note": "n", "log": ["yes|n|dry", "quiet"]}
    resumed, first = await client.runs.list(thread.thread_id)
    assert resumed["metadata"] == {"by": "respond-test"} and first["metadata"] == {}
    assert (await client.runs.get(thread.thread_id, resumed["run_id"]))["metadata"] == {"by": "respond-test"}


BAD_EXTRAS: list[dict[str, Any]] = [
    {"update": {"nope": 1}},
    {"update": "note"},
    {"goto": "nowhere"},
    {"goto": 7},
    {"config": {"bogus": 1}},
    {"config": "dry"},
    {"config": {"recursion_limit": 0}},
    {"config": {"configurable": {"tone": "x" * 20_000}}},
    {"metadata": "by"},
    {"metadata": {"by": "x" * 20_000}},
]


async def input_respond_refuses_bad_extras_as_a_run_would_and_runs_nothing(url: str, key: str) -> None:
    client: Any = get_client(url=url, api_key=key)
    async with (
        client.threads.stream(assistant_id="respond") as thread,
        httpx.AsyncClient(base_url=url, headers={"x-api-key": key}, timeout=60) as http,
    ):
        pending = await paused(thread)
        for extra in BAD_EXTRAS:
            command = {"id": 1, "method": "input.respond", "params": {**pending, "response": "yes", **extra}}
            answer = await http.post(f"/threads/{thread.thread_id}/commands", json=command)
            assert answer.status_code == 200, answer.text
            told = answer.json()
            assert (told["type"], told["error"], told["code"]) == ("error", "invalid_argument", "validation_error"), (
                str(extra)[:80],
                told,
            )
        assert await orm(turn_count, key=thread.thread_id) == 1
        # Still waiting, for the SDK's own respond(): the answer alone, as before.
        await thread.run.respond("ok")
        final = await thread.output
    assert langgraph_values(final) == bare_langgraph({"log": []}, Command(resume="ok"), {}) == {"log": ["ok|-|-"]}


def turn_count(key: str) -> int:
    return AgentTurn.objects.filter(session__key=key).count()  # aborted ones too


async def test_input_respond_options(servers, alice):
    # One server for both (a server start costs more than they do).
    url = f"{servers(AGENT_GRAPHS=GRAPHS, AGENT_GRAPH='steps').url}/langgraph"
    async with asyncio.timeout(TEST_SECONDS):
        await input_respond_forwards_update_goto_config_and_metadata(url, alice)
        await input_respond_refuses_bad_extras_as_a_run_would_and_runs_nothing(url, alice)
