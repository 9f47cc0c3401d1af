"""A thread's history shows each run's input as the run applied it
(docs/agent-protocol.md, "History"): the state before a protocol input
run's reply is its parent state with the input's messages added by
`add_messages` (ids kept, or `<run id>:<index>`), and a run given no
input (a state update, a command) has no such state. Through the real
`langgraph_sdk` against a daphne server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_sdk import get_client

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 90


def shown(messages: Any) -> list[tuple[str, str, str]]:
    return [(m["type"], m["content"], m["id"]) for m in messages]


async def run_with(client, tid: str, **kwargs) -> str:
    run = await client.runs.create(tid, "intake", **kwargs)
    await client.runs.join(tid, run["run_id"])
    return run["run_id"]


def states_of_run(history: Any, run_id: str) -> dict[str, Any]:
    """A run's newest state of each source (history is newest first)."""
    found: dict[str, Any] = {}
    for state in history:
        if state["metadata"].get("run_id") == run_id:
            found.setdefault(state["metadata"]["source"], state)
    return found


async def test_the_input_state_holds_exactly_the_messages_sent(servers, alice):
    server = servers()
    client = get_client(url=f"{server.url}/langgraph", api_key=alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = (await client.threads.create())["thread_id"]
        sent = [{"role": "user", "content": "Hello", "id": "greeting"}, {"role": "user", "content": "I am Ada"}]
        first = await run_with(client, tid, input={"messages": sent})
        history: Any = await client.threads.get_history(tid, limit=100)
        states = states_of_run(history, first)
        assert set(states) == {"input", "loop"}, history
        assert shown(states["input"]["values"]["messages"]) == [
            ("human", "Hello", "greeting"),
            ("human", "I am Ada", f"{first}:1"),
        ]
        # The run's own committed state starts with the same messages.
        after = states["loop"]["values"]["messages"]
        assert shown(after[:2]) == shown(states["input"]["values"]["messages"]), after

        # A state update is a run given no input: no input state of its own.
        await client.threads.update_state(tid, {"messages": [{"role": "user", "content": "noted", "id": "n1"}]})
        history = await client.threads.get_history(tid, limit=100)
        update = history[0]["metadata"]["run_id"]
        assert set(states_of_run(history, update)) == {"update"}, history

        # A second input run: the parent state (the update included) with the
        # new message added, and one that replaces a message by its id.
        second = await run_with(
            client,
            tid,
            input={"messages": [{"role": "user", "content": "Hello again", "id": "greeting"}, "and more"]},
        )
        history = await client.threads.get_history(tid, limit=100)
        given = states_of_run(history, second)["input"]
        parent = states_of_run(history, update)["update"]
        assert given["parent_checkpoint"] == parent["checkpoint"]  # the update's state, before the run
        expected = [
            ("human", "Hello again", "greeting") if m["id"] == "greeting" else (m["type"], m["content"], m["id"])
            for m in parent["values"]["messages"]
        ] + [("human", "and more", f"{second}:1")]
        assert ("human", "noted", "n1") in expected
        assert shown(given["values"]["messages"]) == expected
