"""LangGraph's thread-stream protocol over WebSocket (docs/agent-protocol.md,
"Thread streams") against a real daphne, with the `websockets` client the
SDK uses: the handshake is authenticated and owner-checked, every frame is
a command answered by a frame, events come once per socket, `agent.getTree`
names the run's agents, `applied_through_seq` is the last seq sent. The
SDK's own use of it is LangGraph's suite (tests/vendor, test_websocket)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.langgraph_api.test_thread_stream import ENV, START, command, headers

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 120


async def frames_until(socket: Any, last: str) -> list[dict[str, Any]]:
    got = []
    async for raw in socket:
        frame = json.loads(raw)
        got.append(frame)
        params = frame.get("params") or {}
        if frame.get("method") == "lifecycle" and not params["namespace"] and params["data"]["event"] == last:
            return got
    raise AssertionError(f"the socket closed before lifecycle {last}: {got}")


async def ask(socket: Any, command_id: int, method: str, params: dict[str, Any]) -> tuple[dict, list[dict]]:
    """Send a command; its answer, and the events that came before it."""
    await socket.send(json.dumps({"id": command_id, "method": method, "params": params}))
    events: list[dict[str, Any]] = []
    async for raw in socket:
        frame = json.loads(raw)
        if frame.get("type") in ("success", "error") and frame.get("id") == command_id:
            return frame, events
        events.append(frame)
    raise AssertionError("the socket closed before the answer")


async def test_thread_stream_over_websocket(servers, alice, bob):
    server = servers(**ENV)
    thread = "7a1c2e0b-9d3f-4c55-8b1e-2f4a6c8d0e13"
    url = f"{server.url.replace('http', 'ws', 1)}/langgraph/threads/{thread}/stream/events"
    async with (
        asyncio.timeout(TEST_SECONDS),
        httpx.AsyncClient(base_url=f"{server.url}/langgraph", timeout=60) as http,
    ):
        made = await http.post("/threads", json={"thread_id": thread}, headers=headers(alice))
        assert made.status_code == 200, made.text
        # No key, another owner's thread, a path nothing serves: refused upgrades.
        for target, extra in ((url, {}), (url, headers(bob)), (url.replace("/stream/events", "/nope"), headers(alice))):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(target, additional_headers=extra):
                    pass
            assert refused.value.response.status_code == 403

        async with connect(url, additional_headers=headers(alice)) as socket:
            await socket.send("not json")
            bad = json.loads(await socket.recv())
            assert bad["type"] == "error" and bad["error"] == "invalid_argument" and bad["id"] is None
            wrong, _ = await ask(socket, 1, "subscription.subscribe", {"channels": ["nope"]})
            assert wrong["error"] == "invalid_argument", wrong
            # Two subscriptions that both match lifecycle: each event comes once.
            one, _ = await ask(socket, 2, "subscription.subscribe", {"channels": ["lifecycle", "input"]})
            two, _ = await ask(socket, 3, "subscription.subscribe", {"channels": ["lifecycle"]})
            assert one["type"] == two["type"] == "success"
            assert one["result"]["subscription_id"] != two["result"]["subscription_id"]
            started, early = await ask(socket, 4, "run.start", {"assistant_id": "agent", "input": START})
            assert started["type"] == "success" and started["result"]["run_id"], started
            events = early + await frames_until(socket, "interrupted")
            assert len({e["event_id"] for e in events}) == len(events)
            assert {e["method"] for e in events} <= {"lifecycle", "input.requested"}
            asked = next(e for e in events if e["method"] == "input.requested")
            tree, more = await ask(socket, 5, "agent.getTree", {})
            events += more
            assert tree["result"]["tree"]["status"] == "interrupted"
            assert tree["result"]["tree"]["graph_name"] == "agent"
            # applied_through_seq: the last seq this socket sent before the answer.
            assert tree["meta"]["applied_through_seq"] == events[-1]["seq"]
            answer = {"interrupt_id": asked["params"]["data"]["interrupt_id"], "namespace": [], "response": "yes"}
            resumed, more = await ask(socket, 6, "input.respond", answer)
            assert resumed["type"] == "success" and resumed["result"] == {}, resumed
            after = more + await frames_until(socket, "completed")
            assert after[0]["seq"] > events[-1]["seq"]
            again, _ = await ask(socket, 7, "input.respond", answer)
            assert again["error"] == "no_such_interrupt", again
            gone, _ = await ask(socket, 8, "subscription.unsubscribe", {"subscription_id": "nope"})
            assert gone["error"] == "no_such_subscription", gone
            left, _ = await ask(socket, 9, "subscription.unsubscribe", one["result"])
            assert left["type"] == "success"

        # The same tree over HTTP: the root and the subgraph the resumed run ran.
        tree = await command(http, alice, thread, "agent.getTree", {})
        root = tree["result"]["tree"]
        assert root["status"] == "completed" and root["namespace"] == [], root
        assert [child["status"] for child in root["children"]] == ["completed"], root
        assert tree["meta"] == {"applied_through_seq": 0}
        state = (await http.get(f"/threads/{thread}/state", headers=headers(alice))).json()
        assert state["values"]["items"] == ["streamed", "tool", "asked", "sub"]
