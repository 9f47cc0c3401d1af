"""Checkpoints other than the thread's head, as LangGraph's server treats
them (docs/agent-protocol.md, "State updates" and "Runs from a
checkpoint"), through the real `langgraph_sdk` client against a real daphne,
on both databases: a state update at an earlier checkpoint forks from it
(the result the new head, its parent the checkpoint named), one at a step
inside a run too, a run from a step inside a run goes on with the tasks it
had left (a Command beside them, a new input instead of them), a fork is
replayed under its Idempotency-Key, and hostile checkpoint ids are 4xx
with a code."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 120
GRAPHS = "intake=graphs.intake.graph:build_intake_graph,steps=tests.fixtures.graphs:build_steps_graph"


def version_of(key: str) -> int:
    return AgentSession.objects.get(key=key).version


def checkpoint_id(state: Any) -> str:
    return state["checkpoint"]["checkpoint_id"]


def parent_id(state: Any) -> str:
    return state["parent_checkpoint"]["checkpoint_id"]


async def test_updates_and_runs_from_earlier_checkpoints_fork(servers, alice, bob):
    server = servers(AGENT_GRAPHS=GRAPHS)
    # Any: the SDK's TypedDicts do not let a test index what it reads back.
    client: Any = get_client(url=f"{server.url}/langgraph", api_key=alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = (await client.threads.create(metadata={"graph_id": "steps"}))["thread_id"]
        await client.runs.wait(tid, "steps", input={"messages": [{"role": "user", "content": "hi", "id": "m1"}]})
        await client.runs.wait(tid, "steps", input={"log": ["more"]})
        history: Any = await client.threads.get_history(tid, limit=100)
        first_run = history[-2]["metadata"]["run_id"]
        steps = {h["metadata"]["step"]: h for h in history if h["metadata"].get("run_id") == first_run}
        after_first, mid = steps[2], steps[1]  # mid: `first` ran, `second` left to run
        assert (after_first["values"]["log"], after_first["next"]) == (["first", "second"], [])
        assert (mid["values"]["log"], mid["next"]) == (["first"], ["second"])
        version = await orm(version_of, key=tid)

        # An update at the state after the first run forks from it; retried
        # under its key, it is the same turn, replayed.
        key = {"Idempotency-Key": "fork-1"}
        forked = await client.threads.update_state(
            tid, {"note": "forked"}, checkpoint_id=checkpoint_id(after_first), headers=key
        )
        again = await client.threads.update_state(
            tid, {"note": "forked"}, checkpoint_id=checkpoint_id(after_first), headers=key
        )
        assert again == forked
        head = await client.threads.get_state(tid)
        assert checkpoint_id(head) == forked["checkpoint"]["checkpoint_id"]
        assert parent_id(head) == checkpoint_id(after_first)
        assert (head["values"]["log"], head["values"]["note"]) == (["first", "second"], "forked")
        assert await orm(version_of, key=tid) == version + 1
        newest: Any = (await client.threads.get_history(tid, limit=1))[0]
        assert (checkpoint_id(newest), parent_id(newest)) == (checkpoint_id(head), checkpoint_id(after_first))

        # At a step inside the run, as the node that ran there: its edges say
        # what runs next, and a run given nothing runs it.
        await client.threads.update_state(tid, {"log": ["by hand"]}, as_node="first", checkpoint_id=checkpoint_id(mid))
        head = await client.threads.get_state(tid)
        assert (head["values"]["log"], head["next"], parent_id(head)) == (
            ["first", "by hand"],
            ["second"],
            checkpoint_id(mid),
        )
        assert [m["id"] for m in head["values"]["messages"]] == [m["id"] for m in mid["values"]["messages"]]
        done = await client.runs.wait(tid, "steps", input=None)
        assert done["log"] == ["first", "by hand", "second"]

        # A run from that step: no input runs the task it had left; a Command
        # runs it too, after its update; a new input drops it and starts over.
        values = await client.runs.wait(tid, "steps", input=None, checkpoint_id=checkpoint_id(mid))
        assert values["log"] == ["first", "second"] and values["messages"] == mid["values"]["messages"]
        values = await client.runs.wait(
            tid, "steps", command={"update": {"log": ["cmd"]}}, checkpoint_id=checkpoint_id(mid)
        )
        assert values["log"] == ["first", "cmd", "second"]
        values = await client.runs.wait(tid, "steps", input={"log": ["new"]}, checkpoint_id=checkpoint_id(mid))
        assert values["log"] == ["first", "new", "first", "second"]
        assert (await client.threads.get_state(tid))["values"] == values
        newest_run: Any = [
            h
            for h in await client.threads.get_history(tid, limit=10)
            if h["metadata"]["run_id"] == (await client.runs.list(tid, limit=1))[0]["run_id"]
        ]
        assert newest_run[-1]["metadata"]["source"] == "input"
        assert newest_run[-1]["values"]["log"] == ["first", "new"]
        assert parent_id(newest_run[-1]) == checkpoint_id(mid)
        assert await orm(version_of, key=tid) == version + 6

        # Hostile checkpoint ids: refused with a code, nothing written.
        async with httpx.AsyncClient(base_url=f"{server.url}/langgraph", headers={"x-api-key": alice}) as http:
            unknown = str(uuid.UUID(checkpoint_id(mid)[:-4] + "ffff"))
            bobs = (await get_client(url=f"{server.url}/langgraph", api_key=bob).threads.create())["thread_id"]
            for body, status, code in [
                ({"values": {"note": "x"}, "checkpoint_id": "not-a-checkpoint"}, 422, "validation_error"),
                ({"values": {"note": "x"}, "checkpoint_id": str(uuid.UUID(int=5))}, 422, "validation_error"),
                ({"values": {"note": "x"}, "checkpoint_id": unknown}, 404, "session_not_found"),
                ({"values": {"note": "x"}, "checkpoint": {"checkpoint_id": 7}}, 422, "validation_error"),
                (
                    {"values": {"note": "x"}, "checkpoint": {"checkpoint_id": unknown, "checkpoint_ns": "a"}},
                    422,
                    "validation_error",
                ),
            ]:
                answer = await http.post(f"/threads/{tid}/state", json=body)
                assert (answer.status_code, answer.json().get("code")) == (status, code), (body, answer.text)
            for body, status, code in [
                ({"checkpoint_id": "x" * 100}, 422, "validation_error"),
                ({"checkpoint_id": unknown}, 404, "session_not_found"),
            ]:
                answer = await http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "steps", **body})
                assert (answer.status_code, answer.json().get("code")) == (status, code), (body, answer.text)
            # Another owner's thread's checkpoint is no checkpoint of this one.
            answer = await http.post(
                f"/threads/{bobs}/state", json={"values": {"note": "x"}, "checkpoint_id": checkpoint_id(mid)}
            )
            assert answer.status_code == 404, answer.text
        assert await orm(version_of, key=tid) == version + 6
