"""Concurrent clients against the real database: threads, each with its own
event loop, checkpointer and database connections, as separate workers
would have."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.errors import SessionBusy, VersionConflict
from sessions_app.models import AgentSession
from sessions_app.services import session_set_fields
from tests.fixtures.runners import orm, run_in_new_loop
from tests.fixtures.turns import transcript_of
from turns_app.execution import await_turn, start_turn
from turns_app.models import AgentTurn
from turns_app.types import Replay

pytestmark = pytest.mark.django_db(transaction=True)


def chat_in_thread(key: str, text: str, barrier: threading.Barrier) -> dict:
    async def go():
        barrier.wait(timeout=10)
        try:
            run = await start_turn(
                owner="alice",
                key=key,
                request={"text": text, "client_mode": "chat", "need_form_update": True},
                idempotency_key=None,
            )
        except SessionBusy:
            return {"busy": True}
        assert not isinstance(run, Replay)
        import json

        return json.loads(await await_turn(run))

    return run_in_new_loop(go)


def committed_state(key: str):
    session = AgentSession.objects.get(owner="alice", key=key)
    turns = list(AgentTurn.objects.filter(session=session).order_by("number"))
    return session, turns


@pytest.mark.parametrize("wait_seconds", [30, 0.05], ids=["all-wait", "some-busy"])
async def test_eight_concurrent_chats_on_one_session(alice, settings, wait_seconds):
    settings.AGENT_OFFLINE_TOKEN_DELAY_MS = 2
    settings.AGENT_SESSION_WAIT_SECONDS = wait_seconds
    texts = [f"message number {i}" for i in range(8)]
    barrier = threading.Barrier(len(texts))

    def run_all():
        with ThreadPoolExecutor(len(texts)) as pool:
            return list(pool.map(lambda t: chat_in_thread("shared", t, barrier), texts))

    import asyncio

    results = await asyncio.to_thread(run_all)
    done = [r for r in results if not r.get("busy")]
    busy = [r for r in results if r.get("busy")]
    assert len(done) + len(busy) == 8
    if wait_seconds == 30:
        assert not busy
    assert done, "at least the first claim must win"

    session, turns = await orm(committed_state, key="shared")
    # Committed in sequence: versions 1..n, each exactly once.
    assert sorted(r["version"] for r in done) == list(range(1, len(done) + 1))
    assert session.version == len(done)
    assert [t.status for t in turns] == ["committed"] * len(done)
    assert [t.number for t in turns] == list(range(1, len(done) + 1))
    assert session.active_turn_id is None
    # Every committed turn's two messages, none lost, none duplicated.
    messages = await orm(transcript_of, session=session)
    assert len(messages) == 2 * len(done)
    user_texts = [m["content"] for m in messages if m["role"] == "user"]
    assert sorted(user_texts) == sorted(t for t in texts if any(t == turn.request["text"] for turn in turns))
    assert len(set(user_texts)) == len(user_texts)


async def test_set_fields_racing_chat(alice, settings):
    """Set-fields and chat share the session lock: each write lands whole,
    versions stay gapless, and a set-fields that lost the race is refused
    (stale version or busy) rather than applied on top."""
    settings.AGENT_OFFLINE_TOKEN_DELAY_MS = 2
    settings.AGENT_SESSION_WAIT_SECONDS = 30
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def setter(i: int):
        barrier.wait(timeout=10)
        from django.db import connection

        try:
            session_set_fields(owner="alice", key="race", values={"notes": f"note {i}"}, expected_version=0)
            result = "set"
        except (VersionConflict, SessionBusy) as exc:
            result = type(exc).__name__
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    def chatter(i: int):
        r = chat_in_thread("race", f"chat {i}", barrier)
        with lock:
            outcomes.append("busy" if r.get("busy") else "chat")

    await orm(lambda: AgentSession.objects.create(owner="alice", key="race", form=_default_form()))

    def run_all():
        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(setter, i) for i in range(4)] + [pool.submit(chatter, i) for i in range(4)]
            for f in futures:
                f.result(timeout=60)

    import asyncio

    await asyncio.to_thread(run_all)
    session, turns = await orm(committed_state, key="race")
    sets = outcomes.count("set")
    chats = outcomes.count("chat")
    # Exactly one set-fields can match version 0, and only if no chat committed first.
    assert sets <= 1
    assert session.version == sets + chats
    assert [t.status for t in turns] == ["committed"] * chats
    assert len(await orm(transcript_of, session=session)) == 2 * chats
    if sets:
        assert session.fields["notes"].startswith("note ")


def _default_form():
    from sessions_app.services import default_form

    return default_form()


def test_a_claim_that_waited_for_the_lock_reads_what_the_holder_committed(api_key_alice_session):
    """PostgreSQL re-reads a row a `FOR UPDATE` waited for, but not the
    subqueries beside it: the claim's reads must come after the lock, or a
    waiter takes the turn number the holder just used (IntegrityError, a
    500 under same-session load)."""
    from django.db import connection, transaction

    from sessions_app.services import session_lock
    from turns_app.services import claim_reads

    session = api_key_alice_session
    locked, release = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def holder() -> None:
        try:
            with transaction.atomic():
                held = session_lock(session_id=session.pk).session
                AgentTurn.objects.create(
                    session=held,
                    epoch=held.epoch,
                    number=7,
                    base_version=held.version,
                    graph=held.graph,
                    request_digest="x" * 64,
                    request={"text": "held"},
                    status=AgentTurn.Status.COMMITTED,
                    values={"seen": "after the wait"},
                )
                held.head_turn_id = AgentTurn.objects.get(session=held, number=7).pk
                held.save(update_fields=["head_turn_id"])
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    def waiter() -> None:
        try:
            locked.wait(10)
            with transaction.atomic():
                got = session_lock(session_id=session.pk)
                seen["head_values"], seen["last_number"] = claim_reads(got)
        finally:
            connection.close()

    threads = [threading.Thread(target=holder), threading.Thread(target=waiter)]
    for t in threads:
        t.start()
    locked.wait(10)
    threading.Event().wait(0.5)  # the waiter is blocked on the row lock by now
    release.set()
    for t in threads:
        t.join(20)
    assert seen == {"last_number": 7, "head_values": {"seen": "after the wait"}}


@pytest.fixture
def api_key_alice_session(db):
    return AgentSession.objects.create(owner="alice", key="locked", graph="intake")
