"""The stream end to end: a real server process on loopback and a
third-party SSE client (httpx + httpx-sse), against the test database."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, aconnect_sse

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TOKEN_DELAY_MS = 30
TEST_SECONDS = 60


@dataclass
class Received:
    status: int
    headers: httpx.Headers
    # (arrival time, event)
    events: list[tuple[float, ServerSentEvent]] = field(default_factory=list)
    error: dict[str, Any] | None = None

    def named(self, name: str) -> list[ServerSentEvent]:
        return [e for _, e in self.events if e.event == name]

    @property
    def done(self) -> dict[str, Any]:
        (event,) = self.named("done")
        return json.loads(event.data)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def open_stream(client: httpx.AsyncClient, key: str, session: str, text: str):
    path = f"/api/sessions/{session}/turns/stream"
    return aconnect_sse(client, "POST", path, json={"text": text}, headers=auth(key))


def client_of(server) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=30)


async def stream_turn(client: httpx.AsyncClient, key: str, session: str, text: str) -> Received:
    async with open_stream(client, key, session, text) as source:
        response = source.response
        got = Received(response.status_code, response.headers)
        if response.status_code != 200:
            got.error = json.loads(await response.aread())["error"]
            return got
        async for event in source.aiter_sse():
            got.events.append((time.monotonic(), event))
        return got


@pytest.mark.parametrize("kind", ["daphne", "runserver"])
async def test_deltas_arrive_before_the_turn_ends(servers, alice, kind):
    server = servers(kind, AGENT_OFFLINE_TOKEN_DELAY_MS=str(TOKEN_DELAY_MS))
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        got = await stream_turn(client, alice, "s1", "Ada Lovelace")
        info = (await client.get("/api/sessions/s1", headers=auth(alice))).json()
    assert got.status == 200, got.error
    assert got.headers["content-type"] == "text/event-stream"
    assert got.headers["cache-control"] == "no-cache"
    assert got.headers["x-accel-buffering"] == "no"
    assert [e.event for _, e in got.events][0] == "turn" and got.events[-1][1].event == "done"  # noqa: RUF015  (an assertion, kept as written)

    deltas = [at for at, e in got.events if e.event == "delta"]
    done_at = got.events[-1][0]
    assert len(deltas) >= 5, server.log_text()
    # Tokens are produced TOKEN_DELAY_MS apart. Delivered as produced, the
    # first reaches the client at least half that spread before the commit;
    # buffered, everything would arrive at once.
    spread = (len(deltas) - 1) * TOKEN_DELAY_MS / 1000
    assert done_at - deltas[0] >= spread / 2, (done_at - deltas[0], spread)

    done = got.done
    assert done["version"] == info["version"] == 1
    for name in ("fields", "stage", "epoch"):
        assert done[name] == info[name], name
    assert "".join(json.loads(e.data)["text"] for e in got.named("delta")) == done["reply"]


async def test_ten_concurrent_streams_on_ten_sessions(servers, alice):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS=str(TOKEN_DELAY_MS))
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        results = await asyncio.gather(*(stream_turn(client, alice, f"s{i}", "Ada Lovelace") for i in range(10)))
        infos = [(await client.get(f"/api/sessions/s{i}", headers=auth(alice))).json() for i in range(10)]
    for got, info in zip(results, infos, strict=True):
        assert got.status == 200, (got.error, server.log_text())
        assert got.done["version"] == info["version"] == 1


async def test_two_streams_on_one_session_are_serialised(servers, alice):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS=str(TOKEN_DELAY_MS))
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        results = await asyncio.gather(
            stream_turn(client, alice, "s1", "Ada Lovelace"),
            stream_turn(client, alice, "s1", "ada@example.com"),
        )
        info = (await client.get("/api/sessions/s1", headers=auth(alice))).json()
    finished = sorted((got for got in results if got.status == 200), key=lambda got: got.done["version"])
    refused = [got for got in results if got.status != 200]
    # The second waits for the first's commit (up to AGENT_SESSION_WAIT_SECONDS),
    # or is refused whole: never two turns on one session at once.
    assert [got.done["version"] for got in finished] == list(range(1, len(finished) + 1))
    for got in finished:
        turn = json.loads(got.named("turn")[0].data)
        assert turn["base_version"] == got.done["version"] - 1
    assert all((got.status, got.error["code"]) == (409, "session_busy") for got in refused)
    assert len(finished) >= 1 and info["version"] == len(finished)


@pytest.mark.parametrize("on_disconnect,outcome", [("cancel", "aborted"), ("continue", "committed")])
async def test_client_disconnect_through_daphne(servers, alice, on_disconnect, outcome):
    """daphne delivers `http.disconnect` mid-stream and the consumer acts on it."""
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="100", AGENT_ON_DISCONNECT=on_disconnect)
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        async with open_stream(client, alice, "s1", "Ada Lovelace") as source:
            async for event in source.aiter_sse():
                if event.event == "delta":
                    break  # leaving the block closes the connection mid-turn
        while True:
            (turn,) = (await client.get("/api/sessions/s1/turns", headers=auth(alice))).json()
            if turn["status"] != "pending":
                break
            await asyncio.sleep(0.05)
    assert turn["status"] == outcome, server.log_text()
    if outcome == "aborted":
        assert turn["error"]["code"] == "turn_cancelled"


async def reattach(client: httpx.AsyncClient, key: str, session: str, turn_id: str, last: int):
    """(status, events) of a re-attach with Last-Event-ID `last`."""
    path = f"/api/sessions/{session}/turns/{turn_id}/stream"
    headers = {**auth(key), "Last-Event-ID": str(last)}
    async with aconnect_sse(client, "GET", path, headers=headers) as source:
        if source.response.status_code != 200:
            return source.response.status_code, []
        return 200, [event async for event in source.aiter_sse()]


async def test_reattach_after_a_restart_ends_with_the_outcome(servers, alice):
    """A client that saw a delta live, reconnecting after the server
    restarted (the stream now rebuilt from storage, condensed), still gets
    `done` with the id it had live; one that saw `done` gets 204."""
    server = servers("daphne", AGENT_OFFLINE_TOKEN_DELAY_MS="5")
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        got = await stream_turn(client, alice, "s1", "Ada Lovelace")
    live = [e for _, e in got.events]
    assert live[-1].event == "done" and len(live) > 5
    turn_id = json.loads(live[0].data)["turn_id"]
    done_id = int(live[-1].id)

    server.restart()
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        for seen in (3, 4, done_id - 1):  # deltas the stored stream no longer has
            status, events = await reattach(client, alice, "s1", turn_id, seen)
            assert status == 200
            assert [(e.id, e.event) for e in events][-1] == (str(done_id), "done"), seen
            assert json.loads(events[-1].data) == got.done
        status, events = await reattach(client, alice, "s1", turn_id, done_id)
        assert (status, events) == (204, [])
