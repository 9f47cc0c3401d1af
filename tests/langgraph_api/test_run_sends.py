"""`Send` in a run's `command.goto` (docs/agent-protocol.md, "Runs"), as
langgraph-api's `map_cmd` reads it: a `{"node", "input"}` object, or a list
mixing Sends and node names, each a LangGraph `Send`. Driven through the
official `langgraph_sdk` client against one real daphne for the module (a
database of its own, every test on threads of its own), on both databases;
every state is compared with what bare LangGraph (InMemorySaver) gives for
the same graph and the same inputs and commands. Malformed gotos are 422
`validation_error`, nothing written."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Send
from langgraph_sdk import get_client

from langgraph_app.run_input import GOTO_MAX, INPUT_MAX_BYTES
from tests.fixtures.graphs import build_fanout_graph
from tests.fixtures.own_server import server_on_own_database

pytestmark = pytest.mark.system

TEST_SECONDS = 120
GRAPH = "fanout"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("run-sends")
    graphs = f"intake=graphs.intake.graph:build_intake_graph,{GRAPH}=tests.fixtures.graphs:build_fanout_graph"
    env = {"AGENT_GRAPHS": graphs}
    with server_on_own_database(folder, owner="sends", env=env) as (running, key):
        yield f"{running.url}/langgraph", key


def as_langgraph(step: dict[str, Any]) -> Any:
    """A run's body as bare LangGraph's invoke argument (langgraph-api's
    map_cmd: a goto dict is a Send)."""
    if "command" not in step:
        return step["input"]
    command = dict(step["command"])
    goto = command.get("goto")
    if goto is not None:
        listed = goto if isinstance(goto, list) else [goto]
        command["goto"] = [g if isinstance(g, str) else Send(g["node"], g["input"]) for g in listed]
    return Command(**command)


def in_process(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The values bare LangGraph ends each run at."""
    graph = build_fanout_graph(model=None, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "local"}}
    out = []
    for step in steps:
        graph.invoke(as_langgraph(step), config)
        out.append(graph.get_state(config).values)
    return out


def unshown(values: dict[str, Any]) -> dict[str, Any]:
    """Our state values less the `messages` this server shows for every
    thread (`[]` on a graph without the channel), which bare LangGraph,
    having no such channel here, does not."""
    assert values.get("messages", []) == []
    return {k: v for k, v in values.items() if k != "messages"}


async def served(client, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The values our server's thread is at after each run."""
    tid = (await client.threads.create())["thread_id"]
    out = []
    for step in steps:
        await client.runs.wait(tid, GRAPH, **step)
        out.append(unshown((await client.threads.get_state(tid))["values"]))
    return out


SENDS: list[dict[str, Any]] = [
    {"input": {"subjects": ["cats", "dogs"]}},
    # One Send: only `write`, given its input, then its edge.
    {"command": {"goto": {"node": "write", "input": {"subject": "owls"}}}},
    # Sends and a node name together, with an update.
    {
        "command": {
            "goto": [
                {"node": "write", "input": {"subject": "a"}},
                "summarize",
                {"node": "write", "input": {"subject": "b"}},
            ],
            "update": {"subjects": ["x"]},
        }
    },
]


async def test_sends_in_goto_run_as_in_langgraph(server):
    url, key = server
    client: Any = get_client(url=url, api_key=key)
    async with asyncio.timeout(TEST_SECONDS):
        values = await served(client, SENDS)
        assert values == in_process(SENDS)
        assert values[-1]["jokes"] == [
            "joke about cats",
            "joke about dogs",
            "joke about owls",
            "joke about a",
            "joke about b",
        ]
        # A thread's first run a Send, as on a thread LangGraph never ran.
        first: list[dict[str, Any]] = [{"command": {"goto": [{"node": "write", "input": {"subject": "owls"}}]}}]
        assert await served(client, first) == in_process(first)


async def test_a_resume_with_sends_and_its_idempotent_retry(server):
    url, key = server
    client: Any = get_client(url=url, api_key=key)
    steps: list[dict[str, Any]] = [
        {"input": {"subjects": ["cats"], "ask": True}},  # pauses in plan
        {"command": {"resume": "yes", "goto": {"node": "write", "input": {"subject": "owls"}}}},
    ]
    async with asyncio.timeout(TEST_SECONDS):
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, GRAPH, **steps[0])
        assert (await client.threads.get(tid))["status"] == "interrupted"
        headers = {"Idempotency-Key": f"send-{uuid4()}"}
        done = await client.runs.wait(tid, GRAPH, **steps[1], headers=headers)
        expected = in_process(steps)[-1]
        assert unshown(done) == expected == unshown((await client.threads.get_state(tid))["values"])
        assert sorted(expected["jokes"]) == ["joke about cats", "joke about owls"]  # both ran
        # The retry is the same turn, answered from what it stored.
        assert await client.runs.wait(tid, GRAPH, **steps[1], headers=headers) == done
        assert len(await client.runs.list(tid)) == 2


BAD_GOTOS: list[Any] = [
    {"node": "nowhere", "input": {}},  # no such node
    [{"node": "write", "input": {}}, "nowhere"],
    {"node": "__start__", "input": {}},  # LangGraph's own, not the graph's
    {"input": {"subject": "x"}},  # no node
    {"node": 3, "input": {}},
    {"node": ["write"], "input": {}},
    {"node": "write"},  # no input: LangGraph's OpenAPI requires it
    {"node": "w" * 300, "input": {}},
    [{"node": "write", "input": {"subject": "x"}}] * (GOTO_MAX + 1),
    ["summarize"] * (GOTO_MAX + 1),  # names count too
    {"node": "write", "input": {"subject": "x" * INPUT_MAX_BYTES}},
    {},
    5,
    [["write"]],
]


@pytest.mark.parametrize("goto", BAD_GOTOS, ids=range(len(BAD_GOTOS)))
async def test_a_malformed_send_is_refused_and_writes_nothing(server, goto):
    url, key = server
    client: Any = get_client(url=url, api_key=key)
    async with asyncio.timeout(TEST_SECONDS):
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, GRAPH, input={"subjects": ["cats"]})
        before = await client.threads.get_state(tid)
        with pytest.raises(httpx.HTTPStatusError) as caught:
            await client.runs.wait(tid, GRAPH, command={"goto": goto})
        response = caught.value.response
        assert response.status_code == 422
        body = json.loads(await response.aread())
        assert body["code"] == "validation_error" and "command.goto" in body["detail"]
        assert len(await client.runs.list(tid)) == 1
        assert await client.threads.get_state(tid) == before


async def test_runs_from_a_checkpoint_whose_tasks_were_sent(server):
    """The step after `plan` (two sent `write` tasks) of a finished run: no
    input runs its Sends again, a command runs them beside its goto, and a
    state update there applies as LangGraph applies it — each compared
    with bare LangGraph from the same checkpoint of the same run."""
    url, key = server
    client: Any = get_client(url=url, api_key=key)
    local = build_fanout_graph(model=None, checkpointer=InMemorySaver())
    first: dict[str, Any] = {"subjects": ["cats", "dogs"]}
    bodies: list[dict[str, Any]] = [
        {"input": None},
        {"command": {"update": {"subjects": ["x"]}}},
        {"command": {"goto": "summarize"}},
        # Its own Sends: they replace the step's in LangGraph's TASKS channel.
        {
            "command": {
                "goto": [{"node": "write", "input": {"subject": "owls"}}, "summarize"],
                "update": {"subjects": ["x"]},
            }
        },
        {"values": {"subjects": ["q"]}},
    ]
    async with asyncio.timeout(TEST_SECONDS):
        for body in bodies:
            config: Any = {"configurable": {"thread_id": str(uuid4())}}
            local.invoke(first, config)
            sent = next(s for s in local.get_state_history(config) if s.next == ("write", "write"))
            if "values" in body:
                expected = local.invoke(None, local.update_state(sent.config, body["values"]))
            else:
                expected = local.invoke(as_langgraph(body) if "command" in body else None, sent.config)

            tid = (await client.threads.create())["thread_id"]
            await client.runs.wait(tid, GRAPH, input=first)
            history = await client.threads.get_history(tid)
            ours = next(s for s in history if s["next"] == ["write", "write"])
            assert [t["path"] for t in ours["tasks"]] == [["__pregel_push", 0, False], ["__pregel_push", 1, False]]
            at = ours["checkpoint"]["checkpoint_id"]
            if "values" in body:
                updated = await client.threads.update_state(tid, body["values"], checkpoint_id=at)
                done = await client.runs.wait(tid, GRAPH, input=None, checkpoint=updated["checkpoint"])
            else:
                done = await client.runs.wait(tid, GRAPH, checkpoint_id=at, **body)
            assert unshown(done) == expected, body
            assert unshown((await client.threads.get_state(tid))["values"]) == expected
