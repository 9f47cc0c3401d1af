"""Stream modes on /runs/stream and join streams as LangGraph's server sends
them (docs/agent-protocol.md, "Streams and errors"), with the LangGraph
Python SDK and RemoteGraph, unmodified, against a real daphne on the
suite's database: the token stream (`messages`: `messages/metadata`, then
the message so far per chunk) live and resumed after a Last-Event-ID in
the middle of a reply, and `stream_subgraphs` (a subgraph's parts as
`<mode>|<namespace>`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client

from tests.fixtures.own_server import server_on_own_database

pytestmark = pytest.mark.system

GRAPHS = "intake=graphs.intake.graph:build_intake_graph,nested=tests.fixtures.graphs:build_streamed_subgraph_graph"
HELLO = "Hello, my name is Ada Lovelace"


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("stream-modes")
    with server_on_own_database(folder, owner="modes", env={"AGENT_GRAPHS": GRAPHS}) as (server, key):
        yield f"{server.url}/langgraph", key


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def collect(stream) -> list[Any]:
    return [part async for part in stream]


async def values_of(client: Any, thread_id: str) -> dict[str, Any]:
    return (await client.threads.get_state(thread_id))["values"]


async def test_messages_mode_sends_the_message_so_far_token_by_token(served):
    url, key = served
    client = get_client(url=url, api_key=key)
    thread = await client.threads.create()
    parts = await collect(client.runs.stream(thread["thread_id"], "intake", input=human(HELLO), stream_mode="messages"))
    names = [p.event for p in parts]
    assert names[0] == "metadata" and names[-1] == "end", names
    reply = (await values_of(client, thread["thread_id"]))["messages"][-1]
    described = [p.data for p in parts if p.event == "messages/metadata"]
    partials = [p.data[0] for p in parts if p.event == "messages/partial" and p.data[0]["id"] == reply["id"]]
    # The offline model answers token by token: one partial per token, each
    # the whole message so far (an AI message, as LangGraph's server sends it).
    assert len(partials) > 3, partials
    assert all(p["type"] == "ai" for p in partials)
    texts = [p["content"] for p in partials]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert texts[-1] == reply["content"]
    # Its metadata once, before its first partial.
    first_partial = next(i for i, p in enumerate(parts) if p.event == "messages/partial")
    mine = [i for i, p in enumerate(parts) if p.event == "messages/metadata" and reply["id"] in p.data]
    assert len(mine) == 1 and mine[0] < first_partial
    assert described[-1][reply["id"]]["metadata"]["langgraph_node"] == "reply"
    # Resumed after a Last-Event-ID in the middle of the reply: the rest,
    # each partial still the whole message so far, no gap, no duplicate.
    run_id = parts[0].data["run_id"]
    middle = next(i for i, p in enumerate(parts) if p.event == "messages/partial" and p.data[0]["content"] == texts[1])
    rest = await collect(
        client.runs.join_stream(thread["thread_id"], run_id, stream_mode="messages", last_event_id=parts[middle].id)
    )
    assert [(p.id, p.event, p.data) for p in rest] == [(p.id, p.event, p.data) for p in parts[middle + 1 :]]


async def test_messages_and_messages_tuple_together(served):
    url, key = served
    client = get_client(url=url, api_key=key)
    parts = await collect(
        client.runs.stream(None, "intake", input=human(HELLO), stream_mode=["messages", "messages-tuple"])
    )
    tuples = [p.data for p in parts if p.event == "messages"]
    partials = [p.data[0] for p in parts if p.event == "messages/partial"]
    assert tuples and partials
    reply_id = partials[-1]["id"]
    assert "".join(chunk["content"] for chunk, _ in tuples if chunk["id"] == reply_id) == partials[-1]["content"]


async def test_stream_subgraphs_namespaces_the_subgraphs_parts(served):
    url, key = served
    client = get_client(url=url, api_key=key)
    thread = await client.threads.create()
    parts = await collect(
        client.runs.stream(
            thread["thread_id"],
            "nested",
            input=human(HELLO),
            stream_mode=["updates", "values", "messages-tuple"],
            stream_subgraphs=True,
        )
    )
    names = [p.event for p in parts]
    inner = [n for n in names if "|" in n]
    assert inner, names
    assert {n.split("|")[0] for n in inner} == {"updates", "values", "messages"}
    assert all(n.split("|")[1].startswith("inner:") for n in inner)
    root_updates = [p.data for p in parts if p.event == "updates"]
    assert [next(iter(u)) for u in root_updates] == ["inner"]
    inner_updates = [p.data for p in parts if p.event.startswith("updates|")]
    assert [next(iter(u)) for u in inner_updates] == ["answer"]
    # The same run without stream_subgraphs: the root's parts only.
    plain = await collect(
        client.runs.stream(thread["thread_id"], "nested", input=human("again"), stream_mode=["updates"])
    )
    assert not [p.event for p in plain if "|" in p.event]
    # And the committed state is the root graph's, as without subgraphs.
    values = await values_of(client, thread["thread_id"])
    assert [m["type"] for m in values["messages"]] == ["human", "ai", "human", "ai"]


def test_remote_graph_streams_subgraphs(served):
    url, key = served
    nested = RemoteGraph("nested", url=url, api_key=key)
    config: RunnableConfig = {"configurable": {"thread_id": str(uuid4())}}
    chunks = list(nested.stream(human(HELLO), config, stream_mode="updates", subgraphs=True))
    assert [(ns[0].split(":")[0] if ns else None, next(iter(c))) for ns, c in chunks] == [
        ("inner", "answer"),
        (None, "inner"),
    ]


async def test_events_mode_sends_astream_events(served):
    url, key = served
    client = get_client(url=url, api_key=key)
    thread = await client.threads.create()
    parts = await collect(
        client.runs.stream(thread["thread_id"], "intake", input=human(HELLO), stream_mode=["events", "values"])
    )
    names = [p.event for p in parts]
    assert names[0] == "metadata" and names[-1] == "end", names
    events = [p.data for p in parts if p.event == "events"]
    kinds = [e["event"] for e in events]
    # LangGraph's astream_events(version="v2") of the run: its nodes' and
    # the model's starts and ends, the model's tokens one by one.
    assert {"on_chain_start", "on_chain_end", "on_chat_model_start", "on_chat_model_end"} <= set(kinds)
    streamed = [e for e in events if e["event"] == "on_chat_model_stream"]
    tokens = [e["data"]["chunk"]["content"] for e in streamed if e["metadata"]["langgraph_node"] == "reply"]
    reply = (await values_of(client, thread["thread_id"]))["messages"][-1]
    assert len(tokens) > 3 and "".join(tokens) == reply["content"]
    # The root graph's own chunks are the other modes' parts, not events.
    values = [p.data for p in parts if p.event == "values"]
    assert values and values[-1]["messages"][-1] == reply
    assert not [e for e in events if e["event"] == "on_chain_stream" and e["name"] == "LangGraph"]


async def until_run_done(stream: Any) -> list[Any]:
    """A thread's joined stream (it stays open) up to its run's run_done."""
    got: list[Any] = []
    async for part in stream:
        got.append(part)
        if part.event == "metadata" and part.data.get("status") == "run_done":
            await stream.aclose()
            return got
    raise AssertionError(f"the stream ended early: {got}")


async def test_the_thread_join_stream_sends_the_token_stream(served):
    url, key = served
    client = get_client(url=url, api_key=key)
    thread = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread, "intake", input=human(HELLO), stream_mode="messages")
    await client.runs.join(thread, run["run_id"])
    parts = await until_run_done(await client.threads.join_stream(thread, last_event_id="-"))
    partials = [i for i, p in enumerate(parts) if p.event == "messages/partial"]
    texts = [parts[i].data[0]["content"] for i in partials]
    assert len(texts) > 3 and all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts[-3:]))
    # Resumed in the middle of the reply: each partial still the message so far.
    middle = partials[-3]
    rest = await until_run_done(await client.threads.join_stream(thread, last_event_id=parts[middle].id))
    assert [(p.id, p.event, p.data) for p in rest] == [(p.id, p.event, p.data) for p in parts[middle + 1 :]]
