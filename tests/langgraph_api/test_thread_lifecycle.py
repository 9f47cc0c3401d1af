"""A thread's lifecycle through the LangGraph Python SDK (unmodified) against
a real daphne, on both databases (docs/agent-protocol.md, "Thread
lifecycle"): a TTL set on create or patch, and the maintenance pass that
deletes an expired thread through the delete service (tombstone kept,
turns purged); `threads.prune` with `delete` and with `keep_latest` (the
thread and its latest state kept, its older checkpoints gone from history,
its runs kept); `GET /threads/{id}/storage`; and hostile input, each a 4xx
with a code and nothing written."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import httpx
import pytest
from django.utils import timezone
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from turns_app.maintenance import maintenance_run
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 90
# The TTL that expires: 60 ms, so the wait for it is short but real.
TINY_TTL_MINUTES = 0.001


def human(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def session_row(key: str) -> dict:
    session = AgentSession.objects.get(key=key)
    turns = AgentTurn.objects.filter(session=session).count()
    return {"deleted": session.deleted_at is not None, "epoch": session.epoch, "turns": turns}


async def refused(call) -> httpx.Response:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    return caught.value.response


async def until(condition, *, ceiling: float = 10.0, every: float = 0.02) -> None:
    """Wait for `condition()` to hold, at most `ceiling` seconds."""
    async with asyncio.timeout(ceiling):
        while not await condition():  # noqa: ASYNC110  (a clock or a row, not an event)
            await asyncio.sleep(every)


async def test_a_ttl_deletes_the_thread_through_the_delete_service(servers, alice):
    server = servers()
    client = get_client(url=f"{server.url}/langgraph", api_key=alice)
    async with asyncio.timeout(TEST_SECONDS):
        short = await client.threads.create(metadata={"k": "short"}, ttl={"ttl": TINY_TTL_MINUTES})
        tid = short["thread_id"]
        await client.runs.wait(tid, "intake", input=human("Hello, I am Ada Lovelace"))
        kept = await client.threads.create(ttl=60)
        plain = await client.threads.create()
        # A TTL set again by a patch counts from the patch: this one's ran
        # out, the patch gives it a day.
        renewed = await client.threads.create(ttl={"ttl": TINY_TTL_MINUTES, "strategy": "delete"})
        shown: Any = await client.threads.get(tid, include=["ttl"])
        assert shown["ttl"]["strategy"] == "delete" and shown["ttl"]["ttl_minutes"] == TINY_TTL_MINUTES
        assert "ttl" not in await client.threads.get(tid)
        assert "ttl" not in await client.threads.get(plain["thread_id"], include=["ttl"])
        expires_at = datetime.fromisoformat(shown["ttl"]["expires_at"])

        async def expired() -> bool:
            return timezone.now() > expires_at

        await until(expired)
        patched = await client.threads.update(renewed["thread_id"], metadata={}, ttl=24 * 60)
        assert patched["thread_id"] == renewed["thread_id"]
        assert (await orm(session_row, key=tid)) == {"deleted": False, "epoch": 1, "turns": 1}

        report = await orm(maintenance_run)
        assert report.threads_ttl_expired == 1
        with pytest.raises(NotFoundError):
            await client.threads.get(tid)
        # The delete service's tombstone: epoch moved, turns purged.
        assert (await orm(session_row, key=tid)) == {"deleted": True, "epoch": 2, "turns": 0}
        for other in (kept, plain, renewed):
            assert (await client.threads.get(other["thread_id"]))["thread_id"] == other["thread_id"]
        assert (await orm(maintenance_run)).threads_ttl_expired == 0
        # The key comes back as a new thread, with no TTL of the old one.
        again = await client.threads.create(thread_id=tid)
        assert "ttl" not in await client.threads.get(again["thread_id"], include=["ttl"])


async def test_a_keep_latest_ttl_prunes_the_thread_to_its_latest_state(servers, alice):
    # A default TTL (langgraph.json's checkpointer.ttl) for threads created without one.
    server = servers(AGENT_THREAD_TTL='{"strategy": "keep_latest", "default_ttl": 90}')
    client = get_client(url=f"{server.url}/langgraph", api_key=alice)
    async with asyncio.timeout(TEST_SECONDS):
        plain: Any = await client.threads.get((await client.threads.create())["thread_id"], include=["ttl"])
        assert (plain["ttl"]["strategy"], plain["ttl"]["ttl_minutes"]) == ("keep_latest", 90)
        # So does a thread a run creates (if_not_exists="create").
        await client.runs.wait("made-by-a-run", "intake", input=human("Hello"), if_not_exists="create")
        made: Any = await client.threads.get("made-by-a-run", include=["ttl"])
        assert made["ttl"]["ttl_minutes"] == 90
        thread = await client.threads.create(ttl={"ttl": TINY_TTL_MINUTES, "strategy": "keep_latest"})
        tid = thread["thread_id"]
        for text in ("Hello, I am Ada Lovelace", "ada@example.com"):
            await client.runs.wait(tid, "intake", input=human(text))
        # A thread whose keep_latest TTL has not run out is left as it is.
        later = await client.threads.create(ttl={"ttl": 60, "strategy": "keep_latest"})
        await client.runs.wait(later["thread_id"], "intake", input=human("Hello"))
        later_history = await client.threads.get_history(later["thread_id"], limit=100)
        before: Any = await client.threads.get_state(tid)
        assert len(await client.threads.get_history(tid, limit=100)) > 2
        shown: Any = await client.threads.get(tid, include=["ttl"])
        assert shown["ttl"]["strategy"] == "keep_latest" and shown["ttl"]["ttl_minutes"] == TINY_TTL_MINUTES
        expires_at = datetime.fromisoformat(shown["ttl"]["expires_at"])

        async def expired() -> bool:
            return timezone.now() > expires_at

        await until(expired)
        report = await orm(maintenance_run)
        assert (report.threads_ttl_pruned, report.threads_ttl_expired) == (1, 0)
        # As POST /threads/prune with keep_latest: the thread and its latest state stay.
        after = await client.threads.get_state(tid)
        assert (after["values"], after["checkpoint"]) == (before["values"], before["checkpoint"])
        [kept] = await client.threads.get_history(tid, limit=100)
        assert kept["checkpoint"] == before["checkpoint"] and kept["parent_checkpoint"] is None
        assert (await orm(session_row, key=tid)) == {"deleted": False, "epoch": 1, "turns": 2}
        assert await client.threads.get_history(later["thread_id"], limit=100) == later_history
        # Its TTL counts again from the prune.
        again: Any = await client.threads.get(tid, include=["ttl"])
        assert datetime.fromisoformat(again["ttl"]["expires_at"]) > expires_at
        assert again["ttl"]["strategy"] == "keep_latest"
        # A patch to strategy delete deletes it at its TTL instead.
        await client.threads.update(tid, metadata={}, ttl={"ttl": TINY_TTL_MINUTES, "strategy": "delete"})
        deleting: Any = await client.threads.get(tid, include=["ttl"])
        expires_at = datetime.fromisoformat(deleting["ttl"]["expires_at"])
        await until(expired)
        report = await orm(maintenance_run)
        assert (report.threads_ttl_pruned, report.threads_ttl_expired) == (0, 1)
        with pytest.raises(NotFoundError):
            await client.threads.get(tid)


async def test_prune_and_storage(servers, alice, bob):
    server = servers()
    url = f"{server.url}/langgraph"
    client = get_client(url=url, api_key=alice)
    other = get_client(url=url, api_key=bob)
    async with asyncio.timeout(TEST_SECONDS):
        thread = await client.threads.create()
        tid = thread["thread_id"]
        for text in ("Hello, I am Ada Lovelace", "ada@example.com"):
            await client.runs.wait(tid, "intake", input=human(text))
        before: Any = await client.threads.get_state(tid)
        history = await client.threads.get_history(tid, limit=100)
        assert len(history) > 2
        oldest = history[-1]["checkpoint"]["checkpoint_id"]
        storage = await client.http.get(f"/threads/{tid}/storage")
        assert storage["thread_id"] == tid
        assert storage["checkpoints"]["count"] == len(history) - 1  # every state but the start is a record
        sections = ("checkpoints", "channel_values", "pending_writes")
        assert storage["total_bytes"] == sum(storage[s]["bytes"] for s in sections)
        assert storage["channel_values"]["by_channel"]["messages"]["versions"] == 2
        with pytest.raises(NotFoundError):
            await other.http.get(f"/threads/{tid}/storage")

        # keep_latest: the thread and its latest state stay, older checkpoints go.
        assert await client.threads.prune([tid], strategy="keep_latest") == {"pruned_count": 1}
        after = await client.threads.get_state(tid)
        assert after["values"] == before["values"]
        assert after["checkpoint"] == before["checkpoint"]
        [kept] = await client.threads.get_history(tid, limit=100)
        assert kept["checkpoint"] == before["checkpoint"] and kept["parent_checkpoint"] is None
        assert (await client.http.get(f"/threads/{tid}/storage"))["checkpoints"]["count"] == 1
        assert (await refused(client.threads.get_state(tid, checkpoint_id=oldest))).status_code == 404
        from_oldest = client.runs.wait(tid, "intake", input=human("again"), checkpoint_id=oldest)
        gone = await refused(from_oldest)
        assert (gone.status_code, gone.json()["code"]) == (404, "session_not_found"), gone.text
        assert len(await client.runs.list(tid)) == 2  # runs are not checkpoints: LangGraph keeps them
        # The thread goes on from the state kept.
        values: Any = await client.runs.wait(tid, "intake", input=human("I would like a table"))
        assert len(values["messages"]) == len(before["values"]["messages"]) + 2
        newest = await client.threads.get_history(tid, limit=100)
        assert newest[-1]["checkpoint"] == before["checkpoint"]
        assert newest[-2]["parent_checkpoint"] == before["checkpoint"]

        # delete: through the delete service, each a tombstone; unknown ids
        # and other owners' threads are skipped, not counted.
        doomed = [(await client.threads.create())["thread_id"] for _ in range(2)]
        theirs = (await other.threads.create())["thread_id"]
        await client.runs.wait(doomed[0], "intake", input=human("Hello"))
        pruned = await client.threads.prune([*doomed, doomed[0], "no-such-thread", theirs])
        assert pruned == {"pruned_count": 2}
        for key in doomed:
            assert (await orm(session_row, key=key)) == {"deleted": True, "epoch": 2, "turns": 0}
        assert (await other.threads.get(theirs))["thread_id"] == theirs
        assert await client.threads.prune([]) == {"pruned_count": 0}


async def test_hostile_lifecycle_input_is_a_4xx_with_a_code(servers, alice):
    server = servers()
    headers = {"x-api-key": alice}
    async with asyncio.timeout(TEST_SECONDS), httpx.AsyncClient(base_url=f"{server.url}/langgraph") as raw:
        made = await raw.post("/threads", json={}, headers=headers)
        tid = made.json()["thread_id"]
        bad_ttls = [
            5,
            {"ttl": 0},
            {"ttl": -1},
            {"ttl": True},
            {"ttl": "5"},
            {"ttl": 10**12},
            {"strategy": "delete"},
            {"strategy": "sweep", "ttl": 5},
        ]
        for ttl in bad_ttls:
            for method, path in (("post", "/threads"), ("patch", f"/threads/{tid}")):
                response = await raw.request(method, path, json={"ttl": ttl}, headers=headers)
                assert (response.status_code, response.json()["code"]) == (422, "validation_error"), (ttl, method)
        bad_prunes = [
            {},
            {"thread_ids": tid},
            {"thread_ids": [tid], "strategy": "everything"},
            {"thread_ids": [tid, 7]},
            {"thread_ids": [tid] * 1001},
            {"thread_ids": [tid, "../x"]},  # checked before anything is deleted
            {"thread_ids": [tid, "x" * 256]},
        ]
        for body in bad_prunes:
            response = await raw.post("/threads/prune", json=body, headers=headers)
            assert 400 <= response.status_code < 500 and response.json()["code"], (body, response.text)
        assert (await raw.get(f"/threads/{tid}", headers=headers)).status_code == 200
        assert (await raw.post("/threads/prune", json={"thread_ids": [tid]})).status_code == 401
        assert (await raw.get(f"/threads/{tid}/storage")).status_code == 401
        assert (await raw.get("/threads/no-such-thread/storage", headers=headers)).status_code == 404
        assert (await orm(AgentSession.objects.filter(expires_at__isnull=False).count)) == 0
