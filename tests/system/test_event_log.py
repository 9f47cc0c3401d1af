"""The turn event log across real processes: one id sequence per turn for
its whole life, live or replayed, from any process, after any restart
(docs/storage.md, "Event log"). Cross-process tests need PostgreSQL (SQLite serves from one
process by design); the restart and retention ones run on both."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from django.core.management import call_command
from httpx_sse import aconnect_sse

from turns_app.models import AgentTurn, AgentTurnEvent

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TOKEN_DELAY_MS = "40"  # a reply of ~10 tokens takes ~0.4 s to stream
TEST_SECONDS = 60


def auth(key: str, last: int | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}"}
    if last is not None:
        headers["Last-Event-ID"] = str(last)
    return headers


def client_of(server) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=30)


async def start_turn(client, key: str, session: str, text: str, *, keep: int):
    """Stream a turn and drop the connection after `keep` events; returns them."""
    seen = []
    async with aconnect_sse(
        client, "POST", f"/api/sessions/{session}/turns/stream", json={"text": text}, headers=auth(key)
    ) as source:
        assert source.response.status_code == 200
        async for event in source.aiter_sse():
            seen.append(event)
            if len(seen) == keep:
                break
    return seen


async def follow(client, key: str, session: str, turn_id: str, last: int | None):
    """(status, events) of a re-attach, read to its end."""
    path = f"/api/sessions/{session}/turns/{turn_id}/stream"
    async with aconnect_sse(client, "GET", path, headers=auth(key, last)) as source:
        if source.response.status_code != 200:
            return source.response.status_code, []
        return 200, [event async for event in source.aiter_sse()]


def ids(events) -> list[int]:
    return [int(e.id) for e in events]


def reply_of(events) -> str:
    return "".join(json.loads(e.data)["text"] for e in events if e.event == "delta")


def committed_reply(turn_id: str) -> str:
    return json.loads(AgentTurn.objects.get(pk=turn_id).result)["reply"]


@pytest.mark.postgres_only
async def test_reattach_on_another_process_continues_without_gap(servers, alice):
    a = servers(AGENT_OFFLINE_TOKEN_DELAY_MS=TOKEN_DELAY_MS)
    b = servers(AGENT_OFFLINE_TOKEN_DELAY_MS=TOKEN_DELAY_MS)
    async with asyncio.timeout(TEST_SECONDS), client_of(a) as on_a, client_of(b) as on_b:
        seen = await start_turn(on_a, alice, "s1", "Ada Lovelace", keep=4)  # turn, fields, 2 deltas
        turn_id = json.loads(seen[0].data)["turn_id"]
        status, rest = await follow(on_b, alice, "s1", turn_id, last=int(seen[-1].id))
    assert status == 200
    whole = seen + rest
    assert ids(whole) == list(range(1, len(whole) + 1))  # no gap, no duplicate
    assert whole[-1].event == "done"
    committed = await asyncio.to_thread(committed_reply, turn_id)
    assert reply_of(whole) == committed
    assert json.loads(whole[-1].data)["reply"] == committed


@pytest.mark.postgres_only
async def test_two_followers_on_two_processes_see_the_same_stream(servers, alice):
    a = servers(AGENT_OFFLINE_TOKEN_DELAY_MS=TOKEN_DELAY_MS)
    b = servers(AGENT_OFFLINE_TOKEN_DELAY_MS=TOKEN_DELAY_MS)
    async with asyncio.timeout(TEST_SECONDS), client_of(a) as on_a, client_of(b) as on_b:
        owner = asyncio.ensure_future(start_turn(on_a, alice, "s1", "Ada Lovelace", keep=10_000))
        while not (turn := await asyncio.to_thread(lambda: AgentTurn.objects.first())):  # noqa: ASYNC110  (a row, not an event)
            await asyncio.sleep(0.01)
        on_a_follower, on_b_follower = await asyncio.gather(
            follow(on_a, alice, "s1", str(turn.id), last=None),
            follow(on_b, alice, "s1", str(turn.id), last=None),
        )
        live = await owner
    assert on_a_follower[0] == on_b_follower[0] == 200
    as_seen = [(e.id, e.event, e.data) for e in live]
    assert [(e.id, e.event, e.data) for e in on_a_follower[1]] == as_seen
    assert [(e.id, e.event, e.data) for e in on_b_follower[1]] == as_seen
    assert live[-1].event == "done"


@pytest.mark.postgres_only
async def test_a_follower_elsewhere_hears_of_a_killed_process(servers, alice):
    lease = 2.0
    a = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="1000", AGENT_TURN_LEASE_SECONDS=str(lease))
    b = servers(AGENT_TURN_LEASE_SECONDS=str(lease))
    async with asyncio.timeout(TEST_SECONDS), client_of(a) as on_a, client_of(b) as on_b:
        seen = await start_turn(on_a, alice, "s1", "Ada Lovelace", keep=3)
        turn_id = json.loads(seen[0].data)["turn_id"]
        following = asyncio.ensure_future(follow(on_b, alice, "s1", turn_id, last=int(seen[-1].id)))
        await asyncio.sleep(0.3)
        a.kill()
        killed_at = time.monotonic()
        status, rest = await following
        heard_after = time.monotonic() - killed_at
    assert status == 200
    assert rest[-1].event == "error" and json.loads(rest[-1].data)["code"] == "lease_expired"
    assert heard_after < lease + 3, heard_after
    turn = await asyncio.to_thread(AgentTurn.objects.get, pk=turn_id)
    assert turn.status == "aborted"


async def test_replay_after_every_process_restarted_keeps_the_live_ids(servers, alice):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="5")
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        live = await start_turn(client, alice, "s1", "Ada Lovelace", keep=10_000)
    assert live[-1].event == "done"
    turn_id = json.loads(live[0].data)["turn_id"]
    server.restart(kill=True)
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        for last in range(len(live)):
            status, rest = await follow(client, alice, "s1", turn_id, last=last or None)
            assert status == 200
            assert [(e.id, e.event, e.data) for e in rest] == [(e.id, e.event, e.data) for e in live[last:]], last
        assert await follow(client, alice, "s1", turn_id, last=len(live)) == (204, [])


async def test_retention_compacts_the_log_and_replay_still_ends_in_done(servers, alice, settings):
    server = servers()
    async with asyncio.timeout(TEST_SECONDS), client_of(server) as client:
        live = await start_turn(client, alice, "s1", "Ada Lovelace", keep=10_000)
        turn_id = json.loads(live[0].data)["turn_id"]
        settings.AGENT_EVENT_RETENTION_SECONDS = 0
        await asyncio.to_thread(call_command, "sweep_checkpoints")
        kept = await asyncio.to_thread(
            lambda: list(AgentTurnEvent.objects.filter(turn_id=turn_id).values_list("seq", "event"))
        )
        assert sorted(kept) == [(1, "turn"), (len(live), "done")]
        status, replayed = await follow(client, alice, "s1", turn_id, last=3)
    assert status == 200
    assert [(e.id, e.event, e.data) for e in replayed] == [(live[-1].id, "done", live[-1].data)]
