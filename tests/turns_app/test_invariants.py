"""The invariants 1-6 (docs/invariants.md, "The invariants"), each against the real database through the API."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.db import connection

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from tests.fixtures.turns import claim_turn, make_outcome, pause_booking, transcript_of
from turns_app.checkpoint_tables import checkpoint_tables
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)


def session_row(key: str = "s1", owner: str = "alice") -> AgentSession:
    return AgentSession.objects.get(owner=owner, key=key)


def turns(key: str = "s1") -> list[AgentTurn]:
    return list(AgentTurn.objects.filter(session__key=key).order_by("epoch", "number"))


def checkpoint_rows(session_id) -> int:
    total = 0
    with connection.cursor() as cursor:
        for table in checkpoint_tables():
            cursor.execute(
                f"SELECT count(*) FROM {connection.ops.quote_name(table)} WHERE thread_id LIKE %s",
                [f"{session_id}:%"],
            )
            total += cursor.fetchone()[0]
    return total


def body(response) -> dict:
    return json.loads(response.content)


# --- 1. a result is visible only once its commit committed -------------------------


async def test_running_turn_is_invisible_until_commit(api, script):
    await api.chat("s1", "Ada Lovelace")  # version 1
    script.gate = __import__("threading").Event()
    script.reply_started.clear()
    running = asyncio.ensure_future(api.chat("s1", "ada@example.com"))
    await asyncio.to_thread(script.reply_started.wait, 5)

    # The model has produced tokens; nothing of this turn is visible anywhere.
    info = body(await api.call("GET", "/sessions/s1"))
    assert info["version"] == 1
    assert "email" not in info["fields"]
    messages = body(await api.call("GET", "/sessions/s1/messages"))
    assert [m["content"] for m in messages if m["role"] == "user"] == ["Ada Lovelace"]
    log = body(await api.call("GET", "/sessions/s1/turns"))
    assert [t["status"] for t in log] == ["committed", "pending"]

    script.gate.set()
    response = await running
    assert response.status_code == 200
    info = body(await api.call("GET", "/sessions/s1"))
    assert info["version"] == 2
    assert info["fields"]["email"] == "ada@example.com"


async def test_failed_turn_leaves_nothing_behind(api, script):
    await api.chat("s1", "Ada Lovelace")
    before = await orm(session_row)
    script.fail["reply"] = RuntimeError("provider exploded")
    response = await api.chat("s1", "ada@example.com")
    assert response.status_code == 502
    assert body(response)["error"]["code"] == "model_error"
    after = await orm(session_row)
    assert (after.version, after.fields, after.head_turn_id) == (
        before.version,
        before.fields,
        before.head_turn_id,
    )
    assert await orm(transcript_of, session=after) == await orm(transcript_of, session=before)
    assert after.active_turn_id is None
    assert [t.status for t in await orm(turns)] == ["committed", "aborted"]


# --- 2. stale commits are rejected ---------------------------------------------------


async def test_commit_after_delete_is_stale(api, script):
    await api.chat("s1", "Ada Lovelace")
    script.gate = __import__("threading").Event()
    script.reply_started.clear()
    running = asyncio.ensure_future(api.chat("s1", "ada@example.com"))
    await asyncio.to_thread(script.reply_started.wait, 5)
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    script.gate.set()
    response = await running
    assert response.status_code == 409
    assert body(response)["error"]["code"] == "stale_turn"
    row = await orm(session_row)
    assert row.deleted_at is not None and row.fields == {} and row.head_turn_id is None
    assert await orm(turns) == []
    assert await orm(checkpoint_rows, session_id=row.id) == 0


async def test_commit_after_lost_lease_is_stale(api, script, settings, monkeypatch):
    """A turn whose lease ran out is fenced off by the next claim; its late
    commit is refused even though the model finished."""
    settings.AGENT_TURN_LEASE_SECONDS = 0.3
    await api.chat("s1", "Ada Lovelace")
    gate = script.gate = __import__("threading").Event()
    script.reply_started.clear()
    # Freeze lease renewal for the first turn: its process "hangs".
    from turns_app import execution

    original = execution.LeaseKeeper._keep

    async def frozen(self):
        await asyncio.sleep(3600)

    monkeypatch.setattr(execution.LeaseKeeper, "_keep", frozen)
    try:
        slow = asyncio.ensure_future(api.chat("s1", "ada@example.com"))
        await asyncio.to_thread(script.reply_started.wait, 5)
        await asyncio.sleep(0.4)  # the lease expires (it was set before the reply started)
        monkeypatch.setattr(execution.LeaseKeeper, "_keep", original)
        # The next turn gets a lease a loaded machine's late renewal cannot
        # lose: only the hung turn's lease is meant to run out here.
        settings.AGENT_TURN_LEASE_SECONDS = 30
        script.gate = None  # the next turn runs freely...
        fast = await api.chat("s1", "2031-01-02")
    finally:
        monkeypatch.setattr(execution.LeaseKeeper, "_keep", original)
        gate.set()  # ...and only then does the hung one finish
    assert fast.status_code == 200, fast.content
    late = await slow
    # Its client hears what ended it: the next claim aborted it, lease run out.
    assert late.status_code == 409
    assert body(late)["error"]["code"] == "lease_expired"
    statuses = [(t.number, t.status, (t.error or {}).get("code")) for t in await orm(turns)]
    assert statuses == [
        (1, "committed", None),
        (2, "aborted", "lease_expired"),
        (3, "committed", None),
    ]
    row = await orm(session_row)
    assert row.version == 2
    assert "email" not in row.fields


async def test_commit_after_version_moved_is_stale(api, script):
    """Fence on version: even holding the lease, a turn whose base version is
    gone must not commit."""
    from core.errors import StaleTurn
    from turns_app.services import turn_commit

    await api.chat("s1", "Ada Lovelace")
    before = await orm(session_row)
    claim = await claim_turn("s1", "x")
    await orm(lambda: AgentSession.objects.filter(key="s1").update(version=5))
    outcome = make_outcome(claim, fields={"name": "X"})
    with pytest.raises(StaleTurn):
        await orm(turn_commit, turn_id=claim.turn_id, outcome=outcome)
    row = await orm(session_row)
    assert row.version == 5 and row.fields == before.fields
    assert row.active_turn_id is None


# --- 3. the next turn starts from the last committed state -----------------------------


async def test_next_turn_ignores_uncommitted_checkpoint(api, script):
    await api.chat("s1", "Ada Lovelace")
    script.fail["reply"] = RuntimeError("boom")
    # The failing turn's user message reaches the model...
    assert (await api.chat("s1", "SECRET-UNCOMMITTED")).status_code == 502
    del script.fail["reply"]
    assert (await api.chat("s1", "ada@example.com")).status_code == 200
    prompt = script.last("reply")["messages"]
    texts = " ".join(str(m.content) for m in prompt)
    # ...but never the prompt of the next turn, nor the transcript.
    assert "SECRET-UNCOMMITTED" not in texts
    assert "Ada Lovelace" in texts
    messages = body(await api.call("GET", "/sessions/s1/messages"))
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "Ada Lovelace",
        "ada@example.com",
    ]


# --- 4. idempotency -----------------------------------------------------------------------


async def test_same_key_same_request_replays_byte_for_byte(api, script):
    first = await api.chat("s1", "Ada Lovelace", idem="k-1")
    calls = script.count()
    again = await api.chat("s1", "Ada Lovelace", idem="k-1")
    assert again.status_code == 200
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert script.count() == calls
    assert (await orm(session_row)).version == 1
    # Defaults count as given: omitting client_mode is the same request.
    third = await api.chat("s1", "Ada Lovelace", idem="k-1", client_mode="chat")
    assert third.content == first.content


async def test_same_key_different_request_conflicts(api, script):
    await api.chat("s1", "Ada Lovelace", idem="k-1")
    response = await api.chat("s1", "someone else", idem="k-1")
    assert response.status_code == 409
    assert body(response)["error"]["code"] == "idempotency_conflict"
    assert len(await orm(turns)) == 1


async def test_same_key_while_running_is_in_progress(api, script):
    script.gate = __import__("threading").Event()
    running = asyncio.ensure_future(api.chat("s1", "Ada Lovelace", idem="k-1"))
    await asyncio.to_thread(script.reply_started.wait, 5)
    response = await api.chat("s1", "Ada Lovelace", idem="k-1")
    assert response.status_code == 409
    assert body(response)["error"]["code"] == "turn_in_progress"
    script.gate.set()
    assert (await running).status_code == 200
    assert [t.status for t in await orm(turns)] == ["committed"]


async def test_aborted_key_may_be_retried(api, script):
    script.fail["reply"] = RuntimeError("boom")
    assert (await api.chat("s1", "Ada Lovelace", idem="k-1")).status_code == 502
    del script.fail["reply"]
    retry = await api.chat("s1", "Ada Lovelace", idem="k-1")
    assert retry.status_code == 200
    assert [t.status for t in await orm(turns)] == ["aborted", "committed"]
    assert body(retry)["version"] == 1


# --- 5. delete ------------------------------------------------------------------------------


async def test_delete_purges_checkpoints_and_keeps_tombstone(api, script):
    await api.chat("s1", "Ada Lovelace", idem="k-1")
    await api.chat("s1", "ada@example.com")
    row = await orm(session_row)
    # A paused run of another session has checkpoint rows; it keeps them.
    await pause_booking(api, "paused")
    paused = await orm(session_row, key="paused")
    assert await orm(checkpoint_rows, session_id=paused.id) > 0
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    tomb = await orm(session_row)
    assert tomb.deleted_at is not None
    assert (tomb.epoch, tomb.version) == (row.epoch + 1, row.version)
    assert tomb.fields == {} and tomb.head_turn_id is None and tomb.interrupt is None
    assert await orm(turns) == []
    assert await orm(checkpoint_rows, session_id=row.id) == 0
    # Deleting the paused one purges its checkpoints with it.
    assert (await api.call("DELETE", "/sessions/paused")).status_code == 204
    assert await orm(checkpoint_rows, session_id=paused.id) == 0
    # Deleting again succeeds and changes nothing.
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    assert (await orm(session_row)).epoch == tomb.epoch

    # A chat after delete: new epoch, version continues (re-created at +1,
    # then the turn's commit), the old key is not replayed.
    calls = script.count()
    again = await api.chat("s1", "Ada Lovelace", idem="k-1")
    assert again.status_code == 200
    assert script.count() > calls
    data = body(again)
    assert (data["epoch"], data["version"]) == (tomb.epoch, tomb.version + 2)
    messages = body(await api.call("GET", "/sessions/s1/messages"))
    assert [m["content"] for m in messages if m["role"] == "user"] == ["Ada Lovelace"]


# --- 6. set-fields is version-conditional ------------------------------------------------------


async def test_set_fields_is_version_conditional(api, script):
    await api.chat("s1", "Ada Lovelace")
    stale = await api.call("PATCH", "/sessions/s1/fields", {"fields": {"party_size": 2}}, {"If-Match": '"0"'})
    assert stale.status_code == 412
    assert body(stale)["error"]["code"] == "version_conflict"
    missing = await api.call("PATCH", "/sessions/s1/fields", {"fields": {"party_size": 2}})
    assert missing.status_code == 428
    assert (await orm(session_row)).version == 1
    ok = await api.call("PATCH", "/sessions/s1/fields", {"fields": {"party_size": "2"}}, {"If-Match": '"1"'})
    assert ok.status_code == 200, ok.content
    assert body(ok)["fields"]["party_size"] == 2 and body(ok)["version"] == 2
    assert ok["ETag"] == '"2"'
    # The next turn sees the field set outside the conversation.
    reply = body(await api.chat("s1", "ada@example.com"))
    assert reply["fields"]["party_size"] == 2 and reply["version"] == 3


async def test_field_set_outside_the_chat_is_not_overwritten_by_the_next_message(api, script):
    """The assistant asked for the name; the name then arrived through
    set-fields. The next message is not the answer to that question."""
    await api.chat("s1", "hello")  # asks for the name
    ok = await api.call("PATCH", "/sessions/s1/fields", {"fields": {"name": "Ann Lee"}}, {"If-Match": '"1"'})
    assert ok.status_code == 200
    reply = body(await api.chat("s1", "thanks"))
    assert reply["fields"]["name"] == "Ann Lee"
    assert reply["field_changes"] == {}
