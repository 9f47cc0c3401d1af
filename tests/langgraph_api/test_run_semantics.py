"""A run on /langgraph/ means what it means on LangGraph's server
(docs/agent-protocol.md, "Runs"), through the real `langgraph_sdk` client and
`RemoteGraph`, unmodified, against real daphne processes, on both databases:
the input is the graph's input (several messages, tool messages, client
ids kept, other channels through their reducers), commands (`goto`,
`update`, `resume`, RemoteGraph's empty fields), breakpoints, state updates
with `as_node`, a new input while an interrupt waits, and `__interrupt__`
in what wait and join answer."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 120
GRAPHS = (
    "intake=graphs.intake.graph:build_intake_graph,"
    "booking=graphs.booking.graph:build_booking_graph,"
    "steps=tests.fixtures.graphs:build_steps_graph"
)


@pytest.fixture(scope="module")
def server(module_servers):
    # No test here kills or reconfigures it: one for the module; each test
    # makes its own threads with its own key.
    return module_servers(AGENT_GRAPHS=GRAPHS)


def client_for(server, key: str):
    return get_client(url=f"{server.url}/langgraph", api_key=key)


def ids(values: dict) -> list[str]:
    return [m["id"] for m in values["messages"]]


def session_of(key: str) -> AgentSession:
    return AgentSession.objects.get(key=key)


async def status_of(call) -> int:
    """The status of a call the server refused (runs.wait raises httpx's own error)."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    return caught.value.response.status_code


async def new_thread(client) -> str:
    return (await client.threads.create(metadata={"graph_id": "steps"}))["thread_id"]


async def test_the_input_is_the_graphs_input(server, alice):
    client = client_for(server, alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = await new_thread(client)
        # Several messages, a tool call and its tool message among them, each
        # keeping the client's id; and a channel with a reducer of its own.
        sent: list[dict[str, Any]] = [
            {"type": "human", "content": "book it", "id": "client-1"},
            {
                "type": "ai",
                "content": "",
                "id": "client-2",
                "tool_calls": [{"id": "call-1", "name": "book_table", "args": {"party_size": 2}}],
            },
            {"type": "tool", "content": "booked", "tool_call_id": "call-1", "id": "client-3"},
            {"type": "human", "content": [{"type": "text", "text": "thanks"}, {"type": "image", "url": "x"}]},
        ]
        values = await client.runs.wait(tid, "steps", input={"messages": sent, "log": ["mine"], "note": "n1"})
        assert ids(values)[:3] == ["client-1", "client-2", "client-3"]
        [run] = await client.runs.list(tid)
        assert ids(values)[3] == f"{run['run_id']}:3"  # given one only where it had none
        assert values["messages"][3]["content"] == sent[3]["content"]  # content blocks passed through
        assert values["messages"][2]["type"] == "tool" and values["messages"][2]["tool_call_id"] == "call-1"
        assert values["messages"][4]["content"] == "first saw 4 messages"
        assert (values["log"], values["note"]) == (["mine", "first", "second"], "n1")
        assert (await client.threads.get_state(tid))["values"] == values

        # add_messages: a message whose id the input repeats replaces it.
        again = await client.runs.wait(
            tid, "steps", input={"messages": [{"role": "user", "content": "edited", "id": "client-1"}]}
        )
        assert ids(again)[:5] == ids(values)
        assert again["messages"][0]["content"] == "edited"
        assert again["log"] == ["mine", "first", "second", "first", "second"]
        assert (await client.threads.get_state(tid))["values"] == again

        # An input the graph's schema does not have is refused, nothing runs.
        assert await status_of(client.runs.wait(tid, "steps", input={"no_such_channel": 1})) == 422
        assert len(await client.runs.list(tid)) == 2


async def test_commands_goto_update_and_remote_graphs_empty_fields(server, alice):
    client = client_for(server, alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = await new_thread(client)
        await client.runs.wait(tid, "steps", input={"messages": [{"role": "user", "content": "hi"}]})
        # goto a node the edges never reach, with an update: it ends without
        # an AI message, as a LangGraph graph may.
        values = await client.runs.wait(tid, "steps", command={"goto": "quiet", "update": {"note": "went"}})
        assert values["log"] == ["first", "second", "quiet"] and values["note"] == "went"
        assert len(values["messages"]) == 2
        # An update alone runs no node.
        values = await client.runs.wait(tid, "steps", command={"update": [["log", ["by hand"]]]})
        assert values["log"][-1] == "by hand"
        # The Command as RemoteGraph serialises it: null resume/update/graph, empty goto.
        values = await client.runs.wait(
            tid, "steps", command={"resume": None, "goto": ["quiet"], "update": None, "graph": None}
        )
        assert values["log"][-1] == "quiet"
        assert await status_of(client.runs.wait(tid, "steps", command={"goto": "no-such-node"})) == 422
        runs = await client.runs.list(tid)
        assert [r["status"] for r in runs] == ["success"] * 4


async def test_breakpoints_pause_and_a_run_without_input_goes_on(server, alice):
    client = client_for(server, alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = await new_thread(client)
        paused = await client.runs.wait(
            tid, "steps", input={"messages": [{"role": "user", "content": "hi"}]}, interrupt_before=["second"]
        )
        assert paused["log"] == ["first"] and paused["__interrupt__"] == []
        state = await client.threads.get_state(tid)
        assert (await client.threads.get(tid))["status"] == "interrupted"
        assert "__interrupt__" not in state["values"]
        done = await client.runs.wait(tid, "steps", input=None)
        assert done["log"] == ["first", "second"] and "__interrupt__" not in done
        assert (await client.threads.get(tid))["status"] == "idle"

        paused = await client.runs.wait(
            tid, "steps", input={"messages": [{"role": "user", "content": "again"}]}, interrupt_after=["first"]
        )
        assert paused["log"] == ["first", "second", "first"] and paused["__interrupt__"] == []
        # A new input while it waits: a new run from the paused state.
        values = await client.runs.wait(tid, "steps", input={"log": ["new"]})
        assert values["log"] == ["first", "second", "first", "new", "first", "second"]
        assert await orm(lambda: session_of(tid).interrupt) is None


async def test_an_interrupt_in_wait_and_join_then_resume_through_remote_graph(server, alice):
    client = client_for(server, alice)
    remote = RemoteGraph("steps", url=f"{server.url}/langgraph", api_key=alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = await new_thread(client)
        config: RunnableConfig = {"configurable": {"thread_id": tid}}
        # RemoteGraph keeps the client's message id.
        out = await remote.ainvoke({"messages": [HumanMessage("hi", id="client-msg-1")]}, config)
        assert out["messages"][0]["id"] == "client-msg-1"

        run = await client.runs.create(
            tid, "steps", input={"messages": [{"role": "user", "content": "x"}], "note": "ask"}
        )
        joined = await client.runs.join(tid, run["run_id"])
        [pending] = joined["__interrupt__"]
        assert pending["value"] == "ok?"
        waited = await client.runs.wait(tid, "steps", input=None)  # nothing answers it: it asks again
        assert waited["__interrupt__"][0]["value"] == "ok?"
        # RemoteGraph's resume: {"resume": "yes", "goto": [], "update": null, "graph": null}.
        out = await remote.ainvoke(Command(resume="yes"), config)
        assert out["log"][-2:] == ["answer:yes", "second"]
        assert (await client.threads.get(tid))["status"] == "idle"
        assert await status_of(client.runs.wait(tid, "steps", command={"resume": "again"})) == 409
        # A new input while interrupt() waits: the interrupt is dropped, a new
        # run starts from the paused state.
        paused = await client.runs.wait(tid, "steps", input={"note": "ask"})
        assert paused["__interrupt__"][0]["value"] == "ok?"
        values = await client.runs.wait(tid, "steps", input={"note": "skip"})
        assert values["log"][-4:] == ["second", "first", "first", "second"]
        assert "__interrupt__" not in values and (await client.threads.get(tid))["status"] == "idle"


async def test_state_updates_as_a_node_are_turns(server, alice):
    client = client_for(server, alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = await new_thread(client)
        await client.runs.wait(tid, "steps", input={"messages": [{"role": "user", "content": "hi", "id": "m1"}]})
        before = await client.threads.get_state(tid)
        version = await orm(lambda: session_of(tid).version)
        # As `first`: its edges say `second` runs next; the thread waits there.
        moved = await client.threads.update_state(
            tid,
            {"log": ["by hand"], "messages": [{"role": "user", "content": "edited", "id": "m1"}]},
            as_node="first",
            checkpoint_id=before["checkpoint"]["checkpoint_id"],
        )
        assert moved["checkpoint"]["checkpoint_id"] > before["checkpoint"]["checkpoint_id"]
        state = await client.threads.get_state(tid)
        assert state["values"]["log"] == ["first", "second", "by hand"]
        assert state["values"]["messages"][0] == {**before["values"]["messages"][0], "content": "edited"}
        assert await orm(lambda: session_of(tid).version) == version + 1
        assert await orm(lambda: session_of(tid).interrupt["next"]) == ["second"]
        with pytest.raises(UnprocessableEntityError):
            await client.threads.update_state(tid, {"note": "x"}, as_node="no-such-node")
        done = await client.runs.wait(tid, "steps", input=None)
        assert done["log"] == ["first", "second", "by hand", "second"]
        # Without as_node: written, nothing left to run. With an
        # Idempotency-Key, a retry is the same turn, replayed.
        key = {"Idempotency-Key": "note-1"}
        first = await client.threads.update_state(tid, {"note": "set"}, headers=key)
        again = await client.threads.update_state(tid, {"note": "set"}, headers=key)
        assert first == again
        assert (await client.threads.get_state(tid))["values"]["note"] == "set"
        assert await orm(lambda: session_of(tid).interrupt) is None
        assert await orm(lambda: session_of(tid).version) == version + 3
    turns = await orm(lambda: list(AgentTurn.objects.filter(session__key=tid).order_by("number")))
    assert [t.status for t in turns] == ["committed", "interrupted", "committed", "committed"]
