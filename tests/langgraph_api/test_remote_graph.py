"""LangGraph's `RemoteGraph` (langgraph.pregel.remote, unmodified) against a
real daphne serving /langgraph/ (docs/agent-protocol.md, "Conformance"):
invoke, stream in each stream mode, state, history and state updates, an
interrupt and its resume on the booking graph, and a RemoteGraph used as a
node of a local graph. One server for the module, on a database of its own;
every test on threads of its own. What agentsite does not do yet is a
strict xfail with the feature it needs: a test that starts passing fails
until its mark is removed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command, StreamMode

from tests.fixtures.own_server import server_on_own_database, with_sdk_suite_graphs

pytestmark = pytest.mark.system

GRAPHS = (
    "intake=graphs.intake.graph:build_intake_graph,booking=graphs.booking.graph:build_booking_graph,"
    # LangGraph's own test graph: streams custom events, pauses in ask_human.
    "agent=streaming_graph:graph"
)
BOOKING_TEXT = "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace"
HELLO = "Hello, my name is Ada Lovelace"


@pytest.fixture(scope="module")
def remote(tmp_path_factory) -> Iterator[Any]:
    """`remote(graph_id)`: a RemoteGraph of the module's server."""
    folder = tmp_path_factory.mktemp("remote-graph")
    env = with_sdk_suite_graphs({"AGENT_GRAPHS": GRAPHS})
    with server_on_own_database(folder, owner="remote-graph", env=env) as (server, key):

        def make(graph_id: str) -> RemoteGraph:
            return RemoteGraph(graph_id, url=f"{server.url}/langgraph", api_key=key)

        yield make


def thread() -> RunnableConfig:
    return {"configurable": {"thread_id": str(uuid4())}}


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_invoke_returns_the_final_state_and_continues_the_thread(remote):
    intake, config = remote("intake"), thread()
    first = intake.invoke(human(HELLO), config)
    assert [m["type"] for m in first["messages"]] == ["human", "ai"]
    assert first["messages"][0]["content"] == HELLO
    assert first["fields"]["name"] == "Ada Lovelace"
    second = intake.invoke(human("ada@example.com"), config)
    assert [m["type"] for m in second["messages"]] == ["human", "ai", "human", "ai"]
    assert second["messages"][:2] == first["messages"]
    assert second["fields"]["email"] == "ada@example.com"


async def test_ainvoke_returns_the_final_state(remote):
    values = await remote("intake").ainvoke(human(HELLO), thread())
    assert [m["type"] for m in values["messages"]] == ["human", "ai"]


def stream(graph: RemoteGraph, mode: StreamMode, text: str = HELLO) -> list[Any]:
    return list(graph.stream(human(text), thread(), stream_mode=mode))


def test_stream_values(remote):
    chunks = stream(remote("intake"), "values")
    assert len(chunks[0]["messages"]) == 1
    assert chunks[-1]["messages"][-1]["type"] == "ai"


def test_stream_updates(remote):
    chunks = stream(remote("intake"), "updates")
    assert [next(iter(c)) for c in chunks] == ["extract", "reply"]
    assert chunks[-1]["reply"]["messages"][-1]["type"] == "ai"


def test_stream_messages(remote):
    intake = remote("intake")
    config = thread()
    chunks = list(intake.stream(human(HELLO), config, stream_mode="messages"))
    assert chunks and all(isinstance(c, tuple) and len(c) == 2 for c in chunks)
    reply = intake.get_state(config).values["messages"][-1]
    text = "".join(chunk["content"] for chunk, meta in chunks if chunk["id"] == reply["id"])
    assert text == reply["content"]
    assert {meta["langgraph_node"] for _, meta in chunks} == {"reply"}


def test_stream_custom(remote):
    chunks = stream(remote("agent"), "custom")
    steps = [(c["step"], c["phase"]) for c in chunks]
    assert steps[:2] == [("stream_message", "start"), ("stream_message", "end")]
    assert ("ask_human", "start") in steps


def test_stream_debug(remote):
    chunks = stream(remote("intake"), "debug")
    assert {"checkpoint", "task", "task_result"} <= {c["type"] for c in chunks}


def test_stream_tasks(remote):
    chunks = stream(remote("intake"), "tasks")
    assert [c["name"] for c in chunks if "input" in c] == ["extract", "reply"]


def test_stream_checkpoints(remote):
    config = thread()
    chunks = list(remote("intake").stream(human(HELLO), config, stream_mode="checkpoints"))
    assert chunks and all({"values", "next", "metadata"} <= set(c) for c in chunks)
    # They name the protocol's thread, not the run's private checkpoint thread.
    thread_id = config["configurable"]["thread_id"]
    assert {c["config"]["configurable"]["thread_id"] for c in chunks} == {thread_id}
    assert {c["checkpoint"]["thread_id"] for c in chunks} == {thread_id}
    assert chunks[-1]["values"]["messages"][-1]["type"] == "ai"
    assert chunks[-1]["next"] == []
    # Their ids are the ones the thread's history shows, parents included.
    history = list(remote("intake").get_state_history(config))
    shown = [
        (h.config["configurable"]["checkpoint_id"], h.parent_config["configurable"]["checkpoint_id"])
        for h in history[:-1]
    ]
    streamed = [(c["checkpoint"]["checkpoint_id"], c["parent_checkpoint"]["checkpoint_id"]) for c in chunks]
    assert streamed == shown[::-1]  # all but the thread's start, oldest first
    assert [c["metadata"]["step"] for c in chunks] == [h.metadata["step"] for h in history[:-1]][::-1]


def test_get_state_history_and_update_state(remote):
    intake, config = remote("intake"), thread()
    intake.invoke(human(HELLO), config)
    values = intake.invoke(human("ada@example.com"), config)
    state = intake.get_state(config)
    assert state.values == values
    assert state.next == ()
    history = list(intake.get_state_history(config))
    assert history[0].config == state.config
    ids = [h.config["configurable"]["checkpoint_id"] for h in history]
    assert ids == sorted(ids, reverse=True)
    # A checkpoint per step, as LangGraph writes them: each run's input, then
    # each superstep, with the tasks it has left to run.
    newest_run = [h for h in history if h.metadata.get("run_id") == history[0].metadata["run_id"]]
    assert [(h.metadata["source"], h.metadata["step"], h.next) for h in newest_run] == [
        ("loop", 2, ()),
        ("loop", 1, ("reply",)),
        ("loop", 0, ("extract",)),
        ("input", -1, ("__start__",)),
    ]
    assert [[t.name for t in h.tasks] for h in newest_run] == [[], ["reply"], ["extract"], ["__start__"]]
    assert "extract" in newest_run[1].metadata["writes"]
    assert [h.parent_config["configurable"]["checkpoint_id"] for h in history[:-1]] == ids[1:]
    # A step inside a run reads back as it was: the reply not there yet.
    inside = newest_run[1]
    assert intake.get_state(inside.config).values == inside.values
    assert inside.values["messages"][-1]["content"] == "ada@example.com"
    assert len(history[-1].values.get("messages", [])) == 0
    # A past checkpoint reads back as it was.
    earlier = next(h for h in history if len(h.values.get("messages", [])) == 2)
    assert intake.get_state(earlier.config).values == earlier.values

    moved = intake.update_state(state.config, {"fields": {"party_size": 3}})
    assert moved["configurable"]["checkpoint_id"] > state.config["configurable"]["checkpoint_id"]
    assert intake.get_state(config).values["fields"]["party_size"] == 3


def test_update_state_with_messages_as_a_node(remote):
    intake, config = remote("intake"), thread()
    intake.invoke(human(HELLO), config)
    state = intake.get_state(config)
    note = {"role": "ai", "content": "A note from the operator", "id": "operator-note-1"}
    intake.update_state(state.config, {"messages": [note]}, as_node="reply")
    assert intake.get_state(config).values["messages"][-1]["id"] == "operator-note-1"


def test_booking_pauses_with_its_interrupt(remote):
    booking, config = remote("booking"), thread()
    out = booking.invoke(human(BOOKING_TEXT), config, version="v2")
    [pending] = out.interrupts
    [asked] = pending.value["action_requests"]  # LangChain's human-in-the-loop request
    assert asked["name"] == "book_table" and asked["args"]["name"] == "Ada Lovelace"
    state = booking.get_state(config)
    assert state.next
    assert state.tasks[0].interrupts[0].id == pending.id


def test_booking_resumes_with_a_command(remote):
    booking, config = remote("booking"), thread()
    booking.invoke(human(BOOKING_TEXT), config)
    paused = booking.get_state(config)
    resumed = list(booking.stream(Command(resume={"decisions": [{"type": "approve"}]}), config, stream_mode="debug"))
    done = booking.get_state(config).values
    assert "BK-" in done["messages"][-1]["content"]
    assert booking.get_state(config).next == ()
    # The resumed run's checkpoints follow the paused one, under the ids
    # history shows: the first it streams is the pause it answered.
    history = list(booking.get_state_history(config))
    shown = {h.config["configurable"]["checkpoint_id"] for h in history}
    streamed = [c["payload"]["checkpoint"]["checkpoint_id"] for c in resumed if c["type"] == "checkpoint"]
    assert streamed[0] == paused.config["configurable"]["checkpoint_id"]
    assert set(streamed) <= shown and len(streamed) > 1
    # In history, the paused step keeps the interrupt its task raised.
    at_pause = next(h for h in history if h.config == paused.config)
    assert [i.id for t in at_pause.tasks for i in t.interrupts] == [i.id for t in paused.tasks for i in t.interrupts]
    assert at_pause.next == paused.next


def test_a_remote_graph_as_a_node_of_a_local_graph(remote):
    builder: StateGraph[MessagesState, None, MessagesState, MessagesState] = StateGraph(MessagesState)
    builder.add_node("remote", remote("intake"))
    builder.add_edge(START, "remote")
    local = builder.compile(checkpointer=InMemorySaver())
    config = thread()
    first = local.invoke(MessagesState(messages=[HumanMessage(HELLO, id="client-msg-1")]), config)
    assert (first["messages"][0].type, first["messages"][0].id) == ("human", "client-msg-1")
    assert [m.type for m in first["messages"]] == ["human", "ai"]
    second = local.invoke(MessagesState(messages=[HumanMessage("ada@example.com", id="client-msg-2")]), config)
    assert [m.type for m in second["messages"]] == ["human", "ai", "human", "ai"]
