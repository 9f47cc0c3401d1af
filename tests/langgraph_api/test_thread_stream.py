"""LangGraph's thread-stream protocol (docs/agent-protocol.md, "Thread
streams") against real daphne processes on one database: a thread's
events are the same on every process and resume with `since` on another
process after the first was killed, with no gap and no duplicate; hostile
bodies are refused with 400 (or a protocol error) before anything runs.
The SDK's own use of it is LangGraph's suite (tests/vendor)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.fixtures.own_server import with_sdk_suite_graphs

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 120
ENV = with_sdk_suite_graphs(
    {"AGENT_GRAPHS": "intake=graphs.intake.graph:build_intake_graph,agent=streaming_graph:graph"}
)
ALL = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input", "tasks"]
START = {"messages": [], "value": "init", "items": []}


def headers(key: str) -> dict[str, str]:
    return {"x-api-key": key}


async def command(
    http: httpx.AsyncClient, key: str, thread: str, method: str, params: dict, idempotency_key: str | None = None
) -> dict[str, Any]:
    sent = {**headers(key), **({"Idempotency-Key": idempotency_key} if idempotency_key else {})}
    response = await http.post(
        f"/threads/{thread}/commands", json={"id": 1, "method": method, "params": params}, headers=sent
    )
    assert response.status_code == 200, response.text
    return response.json()


async def events_until(http: httpx.AsyncClient, key: str, thread: str, body: dict, last: str) -> list[dict[str, Any]]:
    """Events of the thread's stream up to the root lifecycle event `last`."""
    got: list[dict[str, Any]] = []
    async with http.stream("POST", f"/threads/{thread}/stream/events", json=body, headers=headers(key)) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[len("data:") :])
            got.append(event)
            params = event["params"]
            if event["method"] == "lifecycle" and not params["namespace"] and params["data"]["event"] == last:
                return got
    raise AssertionError(f"the stream ended before lifecycle {last}: {got}")


def shown(events: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [(e["seq"], e["event_id"], e["method"]) for e in events]


async def test_a_stream_resumes_on_another_process_without_gap_or_duplicate(servers, alice):
    first = servers(**ENV)
    thread = "5d6c1a52-3c1e-4f51-9d55-6f3b3a0d0c11"
    async with (
        asyncio.timeout(TEST_SECONDS),
        httpx.AsyncClient(base_url=f"{first.url}/langgraph", timeout=60) as on_first,
    ):
        started = await command(on_first, alice, thread, "run.start", {"assistant_id": "agent", "input": START})
        assert started["type"] == "success", started
        live = await events_until(on_first, alice, thread, {"channels": ALL}, "interrupted")
        seqs = [e["seq"] for e in live]
        assert seqs == sorted(set(seqs)), "seq rises strictly"
        assert len({e["event_id"] for e in live}) == len(live)
        methods = [e["method"] for e in live]
        assert methods[0] == "lifecycle" and "input.requested" in methods
        deltas = [
            e["params"]["data"]["delta"]["text"]
            for e in live
            if e["params"]["data"].get("event") == "content-block-delta"
        ]
        assert "".join(deltas) == "Hello, world!"
        asked = next(e for e in live if e["method"] == "input.requested")

    first.kill()  # the process that ran and streamed the run is gone
    # (SQLite serves one process per file: the other starts after the kill.)
    second = servers(**ENV)
    async with (
        asyncio.timeout(TEST_SECONDS),
        httpx.AsyncClient(base_url=f"{second.url}/langgraph", timeout=60) as on_second,
    ):
        # From the start, on the other process: the same events, same ids.
        again = await events_until(on_second, alice, thread, {"channels": ALL, "since": 0}, "interrupted")
        assert shown(again) == shown(live)
        # From the middle: exactly the rest.
        middle = len(live) // 2
        rest = await events_until(
            on_second, alice, thread, {"channels": ALL, "since": live[middle]["seq"]}, "interrupted"
        )
        assert shown(rest) == shown(live[middle + 1 :])

        # The resume is a run of its own on the same stream, its seqs above.
        answer = {"interrupt_id": asked["params"]["data"]["interrupt_id"], "namespace": [], "response": "yes"}
        resumed = await command(on_second, alice, thread, "input.respond", answer, "answer-1")
        assert resumed["type"] == "success", resumed
        after = await events_until(on_second, alice, thread, {"channels": ALL, "since": live[-1]["seq"]}, "completed")
        assert after[0]["seq"] > live[-1]["seq"]
        assert len({e["event_id"] for e in live + after}) == len(live) + len(after)
        # Only the input channel, and one namespace: filtered on the server.
        only_input = await events_until(
            on_second,
            alice,
            thread,
            {"channels": ["lifecycle"], "namespaces": [[]], "depth": 0, "since": 0},
            "completed",
        )
        assert {e["method"] for e in only_input} == {"lifecycle"}
        assert all(e["params"]["namespace"] == [] for e in only_input)
        # The answer was taken once: a second one finds no interrupt; its
        # retry under the same Idempotency-Key is replayed, and runs nothing.
        again_answer = await command(on_second, alice, thread, "input.respond", answer)
        assert again_answer["type"] == "error" and again_answer["error"] == "no_such_interrupt"
        retried = await command(on_second, alice, thread, "input.respond", answer, "answer-1")
        assert retried == resumed
        batch = await command(on_second, alice, thread, "input.respond", {"responses": []})
        assert batch["error"] == "invalid_argument", batch
        state = (await on_second.get(f"/threads/{thread}/state", headers=headers(alice))).json()
        assert state["values"]["items"] == ["streamed", "tool", "asked", "sub"]


BAD_SUBSCRIPTIONS = [
    b"not json",
    b"[]",
    b'{"channels": []}',
    b'{"channels": ["nope"]}',
    b'{"channels": [1]}',
    json.dumps({"channels": ["values"] * 33}).encode(),
    b'{"channels": ["values"], "since": -1}',
    b'{"channels": ["values"], "since": true}',
    b'{"channels": ["values"], "since": 9007199254740992}',
    b'{"channels": ["values"], "depth": false}',
    b'{"channels": ["values"], "depth": 65}',
    b'{"channels": ["values"], "namespaces": "x"}',
    b'{"channels": ["values"], "namespaces": [[1]]}',
    json.dumps({"channels": ["values"], "namespaces": [["x" * 257]]}).encode(),
]


async def test_hostile_bodies_are_refused(servers, alice):
    server = servers(**ENV)
    thread = "1f0e3f77-63b5-4b8e-9b52-3d2a7ad1f0a2"
    async with asyncio.timeout(TEST_SECONDS), httpx.AsyncClient(base_url=f"{server.url}/langgraph", timeout=60) as http:
        for body in BAD_SUBSCRIPTIONS:
            response = await http.post(f"/threads/{thread}/stream/events", content=body, headers=headers(alice))
            assert response.status_code == 400, (body, response.text)
            assert response.json()["detail"] and response.json()["code"], body
        # A thread nobody made has no events.
        response = await http.post(
            f"/threads/{thread}/stream/events", json={"channels": ["values"]}, headers=headers(alice)
        )
        assert response.status_code == 404
        for body in (
            b"not json",
            b"[]",
            b'{"method": "run.start"}',
            b'{"id": "1", "method": "run.start"}',
            b'{"id": 1, "method": "run.start", "params": []}',
        ):
            response = await http.post(f"/threads/{thread}/commands", content=body, headers=headers(alice))
            assert response.status_code == 400, (body, response.text)
            assert response.json()["type"] == "error" and response.json()["error"] == "invalid_argument"
        unknown = await command(http, alice, thread, "subscription.nope", {})
        assert unknown == {
            "type": "error",
            "id": 1,
            "error": "unknown_command",
            "message": "unknown command 'subscription.nope'",
            "detail": "unknown command 'subscription.nope'",
        }
        refused = await command(http, alice, thread, "run.start", {"assistant_id": "agent", "input": {"nope": 1}})
        assert refused["type"] == "error" and refused["error"] == "invalid_argument", refused
        no_graph = await command(http, alice, thread, "run.start", {"assistant_id": "nope", "input": START})
        assert no_graph["type"] == "error" and no_graph["error"] == "invalid_argument", no_graph
        # Nothing ran: the thread has no run.
        runs = await http.get(f"/threads/{thread}/runs", headers=headers(alice))
        assert runs.status_code == 404 or runs.json() == []
        unauthorized = await http.post(f"/threads/{thread}/commands", json={"id": 1, "method": "run.start"})
        assert unauthorized.status_code == 401


async def test_a_subgraphs_interrupt_is_announced_and_answered_in_its_namespace(servers, alice):
    server = servers(
        AGENT_GRAPHS="intake=graphs.intake.graph:build_intake_graph,nested=tests.fixtures.graphs:build_nested_ask_graph"
    )
    thread = "0c4b8a2e-6f1d-4e3a-9b7c-5d2e8f1a3b46"
    async with asyncio.timeout(TEST_SECONDS), httpx.AsyncClient(base_url=f"{server.url}/langgraph", timeout=60) as http:
        started = await command(http, alice, thread, "run.start", {"assistant_id": "nested", "input": {"messages": []}})
        assert started["type"] == "success", started
        paused = await events_until(http, alice, thread, {"channels": ["lifecycle", "input"]}, "interrupted")
        asked = next(e for e in paused if e["method"] == "input.requested")
        namespace = asked["params"]["namespace"]
        assert len(namespace) == 1 and namespace[0].startswith("child:"), asked
        assert asked["params"]["data"]["payload"] == "which?"
        # Replayed from the start, it is announced in the same place.
        again = await events_until(http, alice, thread, {"channels": ["input", "lifecycle"], "since": 0}, "interrupted")
        replayed = next(e for e in again if e["method"] == "input.requested")
        assert {**replayed, "params": {**replayed["params"], "timestamp": 0}} == {
            **asked,
            "params": {**asked["params"], "timestamp": 0},
        }
        answer = {"interrupt_id": asked["params"]["data"]["interrupt_id"], "namespace": namespace, "response": "this"}
        resumed = await command(http, alice, thread, "input.respond", answer)
        assert resumed["type"] == "success", resumed
        await events_until(http, alice, thread, {"channels": ["lifecycle"], "since": paused[-1]["seq"]}, "completed")
        state = (await http.get(f"/threads/{thread}/state", headers=headers(alice))).json()
        assert state["values"]["answer"] == "this"
