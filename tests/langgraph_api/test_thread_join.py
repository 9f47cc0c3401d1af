"""`GET /threads/{id}/stream` (docs/agent-protocol.md, "Thread streams"),
driven by the LangGraph SDK's `threads.join_stream` against a real daphne:
each run's own stream and its `run_done`, state updates as `state_update`,
the `lifecycle` and `state_update` modes, `Last-Event-ID` resuming exactly
after an id, and bad modes, ids and owners refused before the stream."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 120
GRAPHS = "intake=graphs.intake.graph:build_intake_graph,steps=tests.fixtures.graphs:build_steps_graph"
HELLO: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}


async def parts_until(stream: Any, done: Any) -> list[Any]:
    got: list[Any] = []
    async for part in stream:
        got.append(part)
        if done(got):
            await stream.aclose()
            return got
    raise AssertionError(f"the stream ended early: {got}")


def runs_done(n: int):
    return lambda got: sum(1 for p in got if p.event == "metadata" and p.data.get("status") == "run_done") == n


async def test_join_the_thread_stream(servers, alice, bob):
    server = servers(AGENT_GRAPHS=GRAPHS)
    client = get_client(url=f"{server.url}/langgraph", api_key=alice)
    async with asyncio.timeout(TEST_SECONDS):
        thread = (await client.threads.create(metadata={"graph_id": "steps"}))["thread_id"]
        first = await client.runs.create(thread, "steps", input=HELLO, stream_mode=["values", "updates"])
        await client.runs.join(thread, first["run_id"])
        await client.threads.update_state(thread, {"note": "edited"})
        second = await client.runs.wait(thread, "steps", input=HELLO)
        assert isinstance(second, dict) and second["note"] == "edited"

        # From the thread's first run ('-'), on a stream that stays open.
        parts = await parts_until(await client.threads.join_stream(thread, last_event_id="-"), runs_done(2))
        events = [p.event for p in parts]
        assert events[0] == "metadata" and parts[0].data == {"run_id": first["run_id"], "attempt": 1}
        assert "updates" in events and "values" in events and "state_update" not in events
        ids = [int(p.id) for p in parts]
        assert ids == sorted(set(ids)), "ids rise strictly"
        done_first = next(p for p in parts if p.data == {"status": "run_done", "run_id": first["run_id"]})

        # Resumed after the first run's end: exactly the rest.
        rest = await parts_until(await client.threads.join_stream(thread, last_event_id=done_first.id), runs_done(1))
        assert [(p.event, p.id) for p in rest] == [(p.event, p.id) for p in parts[parts.index(done_first) + 1 :]]

        lifecycle = await parts_until(
            await client.threads.join_stream(thread, last_event_id="-", stream_mode="lifecycle"), runs_done(2)
        )
        assert [p.event for p in lifecycle] == ["metadata"] * 4
        updates = await parts_until(
            await client.threads.join_stream(thread, last_event_id="-", stream_mode=["state_update", "lifecycle"]),
            runs_done(2),
        )
        update = next(p for p in updates if p.event == "state_update")
        assert update.data["thread_id"] == thread and update.data["state"]["values"]["note"] == "edited"
        assert {p.event for p in updates} == {"metadata", "state_update"}

        async with httpx.AsyncClient(base_url=f"{server.url}/langgraph", timeout=30) as http:
            url = f"/threads/{thread}/stream"
            for params, headers, status in (
                ({"stream_modes": "nope"}, {"x-api-key": alice}, 422),
                ({}, {"x-api-key": alice, "Last-Event-ID": "abc"}, 422),
                ({}, {"x-api-key": bob}, 404),
                ({}, {}, 401),
            ):
                answer = await http.get(url, params=params, headers=headers)
                assert answer.status_code == status, (params, headers, answer.text)
                assert answer.json()["code"], answer.text
