"""What a run is asked besides its input, as LangGraph's server takes it,
through the unmodified `langgraph_sdk` against a real daphne on the suite's
database (docs/agent-protocol.md, "Thread streams" and "Runs from a
checkpoint"; docs/turn-protocol.md, "Idempotency"):

* `input.respond` forwards the command's `update` and `goto` into the
  resume's Command and its `config` and `metadata` to the run, as
  LangGraph's server does — the resumed run ends as bare LangGraph's does
  with the same Command — and refuses bad ones as a run would, running
  nothing;
* a run or a state update from a checkpoint records the checkpoint in its
  request, so its Idempotency-Key sent again with the same checkpoint is
  replayed and with another one is a 409 `idempotency_conflict`, nothing
  written; a run naming no checkpoint stores nothing more.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from django.test import AsyncClient
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError

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


def checkpoint_of(state: Any) -> str:
    return state["checkpoint"]["checkpoint_id"]


def turn_count(key: str) -> int:
    return AgentTurn.objects.filter(session__key=key).count()  # aborted ones too


async def written(client: Any, tid: str) -> tuple[Any, ...]:
    """What the thread holds: its turns, its runs, its state's checkpoint and its history's."""
    runs = [r["run_id"] for r in await client.runs.list(tid, limit=100)]
    history = [checkpoint_of(h) for h in await client.threads.get_history(tid, limit=100)]
    return await orm(turn_count, key=tid), runs, checkpoint_of(await client.threads.get_state(tid)), history


async def a_key_sent_again_from_another_checkpoint_conflicts(url: str, key: str) -> None:
    client: Any = get_client(url=url, api_key=key)
    tid = (await client.threads.create(metadata={"graph_id": "steps"}))["thread_id"]
    await client.runs.wait(tid, "steps", input={"log": ["one"]})
    after_one = checkpoint_of(await client.threads.get_state(tid))
    await client.runs.wait(tid, "steps", input={"log": ["two"]})
    now = checkpoint_of(await client.threads.get_state(tid))
    # From the current state (after the run's own commit, the state after
    # a run), then from the state after the first run (a fork).
    for name, start, other in (("now", now, after_one), ("after", after_one, now)):
        headers = {"Idempotency-Key": f"from-{name}"}
        run = await client.runs.create(tid, "steps", input={"log": [name]}, checkpoint_id=start, headers=headers)
        await client.runs.join(tid, run["run_id"])
        before = await written(client, tid)
        again = await client.runs.create(tid, "steps", input={"log": [name]}, checkpoint_id=start, headers=headers)
        assert again["run_id"] == run["run_id"]
        assert await written(client, tid) == before
        with pytest.raises(ConflictError) as refused:
            await client.runs.create(tid, "steps", input={"log": [name]}, checkpoint_id=other, headers=headers)
        assert refused.value.response.json()["code"] == "idempotency_conflict"
        assert await written(client, tid) == before

    # A state update from a checkpoint: the same.
    headers = {"Idempotency-Key": "update-from-one"}
    forked = await client.threads.update_state(tid, {"note": "x"}, checkpoint_id=after_one, headers=headers)
    before = await written(client, tid)
    again = await client.threads.update_state(tid, {"note": "x"}, checkpoint_id=after_one, headers=headers)
    assert again == forked and await written(client, tid) == before
    with pytest.raises(ConflictError) as refused:
        await client.threads.update_state(tid, {"note": "x"}, checkpoint_id=now, headers=headers)
    assert refused.value.response.json()["code"] == "idempotency_conflict"
    assert await written(client, tid) == before


async def test_respond_options_and_checkpoint_keys(servers, alice):
    # One server for the three (a server start costs more than they do).
    url = f"{servers(AGENT_GRAPHS=GRAPHS, AGENT_GRAPH='steps').url}/langgraph"
    async with asyncio.timeout(TEST_SECONDS):
        await input_respond_forwards_update_goto_config_and_metadata(url, alice)
        await input_respond_refuses_bad_extras_as_a_run_would_and_runs_nothing(url, alice)
        await a_key_sent_again_from_another_checkpoint_conflicts(url, alice)


def requests_of(key: str) -> list[dict[str, Any]]:
    return list(AgentTurn.objects.filter(session__key=key).order_by("number").values_list("request", flat=True))


async def test_only_a_run_from_a_checkpoint_records_it(alice, settings):
    settings.AGENT_GRAPHS = {"steps": "tests.fixtures.graphs:build_steps_graph"}
    http, headers = AsyncClient(), {"Authorization": f"Bearer {alice}"}

    async def post(path: str, body: dict[str, Any]) -> Any:
        answer = await http.post(f"/langgraph{path}", data=body, content_type="application/json", headers=headers)
        assert answer.status_code == 200, answer.content
        return json.loads(answer.content)

    tid = (await post("/threads", {"metadata": {"graph_id": "steps"}}))["thread_id"]
    await post(f"/threads/{tid}/runs/wait", {"assistant_id": "steps", "input": {"log": ["one"]}})
    history = json.loads((await http.get(f"/langgraph/threads/{tid}/history", headers=headers)).content)
    after, step = checkpoint_of(history[0]), checkpoint_of(history[1])  # the run's last and one inside it
    for start in (after, step):
        await post(f"/threads/{tid}/runs/wait", {"assistant_id": "steps", "input": None, "checkpoint_id": start})
    plain, from_after, from_step = await orm(requests_of, key=tid)
    assert set(plain) == {"input", "protocol"}  # nothing more on a run naming no checkpoint
    assert from_after["at"] == after and "from" not in from_after
    assert set(from_step) == {"input", "protocol", "from"}  # a step's own note, as before
