"""Followers of a turn's event log are woken by the write, once it commits:
on PostgreSQL by the insert trigger on agent_turn_events (migration 0006:
no pg_notify statement per write, docs/scale.md, "NOTIFY only for followed
turns"), whoever inserts, for a turn
someone follows (migration 0008); on SQLite in-process."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.database import database_settings, postgres_conninfo
from tests.fixtures.runners import orm
from tests.fixtures.turns import claim_turn, make_outcome
from turns_app.maintenance import maintenance_run
from turns_app.models import AgentTurnEvent, TurnFollower
from turns_app.services import events_append, turn_abort, turn_claim, turn_commit
from turns_app.types import Claim, TurnEvent
from turns_app.wakeups import CHANNEL, follow, subscription

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_event_write_wakes_the_turns_followers_after_commit(alice):
    first, second = await claim_turn("s1", "hello"), await claim_turn("s2", "hello")
    async with subscription(first.turn_id) as woken_first, subscription(second.turn_id) as woken_second:
        # Rung by the claim's own `turn` event? It was written before we
        # subscribed; start from silence.
        assert not await woken_first.wait(0.2)
        await orm(events_append, turn_id=first.turn_id, events=[TurnEvent(2, "delta", '{"text": "a"}')])
        assert await woken_first.wait(5)
        assert not await woken_second.wait(0.2)

        def both_in_one_insert() -> None:
            AgentTurnEvent.objects.bulk_create(
                [
                    AgentTurnEvent(turn_id=first.turn_id, seq=3, event="delta", data='{"text": "b"}'),
                    AgentTurnEvent(turn_id=second.turn_id, seq=2, event="delta", data='{"text": "c"}'),
                ]
            )
            from turns_app.wakeups import wake_followers

            wake_followers(first.turn_id)
            wake_followers(second.turn_id)

        await orm(both_in_one_insert)
        assert await woken_first.wait(5) and await woken_second.wait(5)


async def test_a_write_that_rolls_back_wakes_nobody(alice):
    claimed = await claim_turn("s1", "hello")
    async with subscription(claimed.turn_id) as woken:

        def rolled_back() -> None:
            with transaction.atomic():
                AgentTurnEvent.objects.create(turn_id=claimed.turn_id, seq=2, event="delta", data="{}")
                from turns_app.wakeups import wake_followers

                wake_followers(claimed.turn_id)
                raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError):
            await orm(rolled_back)
        assert not await woken.wait(0.5)


@pytest.mark.postgres_only
async def test_on_postgresql_any_insert_notifies_even_without_the_service(alice):
    claimed = await claim_turn("s1", "hello")
    async with subscription(claimed.turn_id) as woken:
        await orm(lambda: AgentTurnEvent.objects.create(turn_id=claimed.turn_id, seq=2, event="delta", data="{}"))
        assert await woken.wait(5)


@pytest.mark.postgres_only
async def test_on_postgresql_a_turns_first_event_notifies_nobody(alice):
    """Nobody can follow a turn before its claim committed: its `turn`
    event (seq 1) would only wake every process's listener for nothing."""
    claimed = await claim_turn("s1", "hello")

    def write_the_first_event_again():
        AgentTurnEvent.objects.filter(turn_id=claimed.turn_id, seq=1).delete()
        AgentTurnEvent.objects.create(turn_id=claimed.turn_id, seq=1, event="turn", data="{}")

    async with subscription(claimed.turn_id) as woken:
        await orm(write_the_first_event_again)
        assert not await woken.wait(0.5)
        await orm(lambda: AgentTurnEvent.objects.create(turn_id=claimed.turn_id, seq=2, event="delta", data="{}"))
        assert await woken.wait(5)


@pytest.mark.postgres_only
async def test_the_listener_comes_back_after_its_connection_is_killed(alice):
    claimed = await claim_turn("s1", "hello")
    async with subscription(claimed.turn_id) as woken:

        def kill_the_listener() -> int:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND query LIKE 'LISTEN %%' AND pid <> pg_backend_pid()"
                )
                return cursor.fetchone()[0]

        assert await orm(kill_the_listener) >= 1
        deadline = asyncio.get_running_loop().time() + 10
        seq = 2
        # Written until one wakes us: the listener is back within RECONNECT_SECONDS.
        while True:
            await orm(
                lambda seq=seq: AgentTurnEvent.objects.create(
                    turn_id=claimed.turn_id, seq=seq, event="delta", data="{}"
                )
            )
            if await woken.wait(0.5):
                break
            seq += 1
            assert asyncio.get_running_loop().time() < deadline, "the listener did not come back"


def _listening() -> psycopg.Connection:
    """A LISTEN connection of the test's own: what any serving process hears."""
    conn = psycopg.connect(postgres_conninfo(database_settings()), autocommit=True)
    conn.execute(f"LISTEN {CHANNEL}")
    return conn


def _heard(conn: psycopg.Connection, seconds: float) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=seconds, stop_after=1)]


@pytest.mark.postgres_only
async def test_on_postgresql_only_a_followed_turn_notifies(alice):
    """A NOTIFY serializes every notifying commit of the database, so a turn
    no one waits on from another process notifies nobody (docs/scale.md, "NOTIFY only for followed turns")."""
    claimed = await claim_turn("s1", "hello")
    listener = _listening()
    try:
        await orm(lambda: AgentTurnEvent.objects.create(turn_id=claimed.turn_id, seq=2, event="delta", data="{}"))
        assert _heard(listener, 0.5) == []
        async with subscription(claimed.turn_id):
            assert await orm(lambda: TurnFollower.objects.filter(turn_id=claimed.turn_id).count()) == 1
            await orm(lambda: AgentTurnEvent.objects.create(turn_id=claimed.turn_id, seq=3, event="delta", data="{}"))
            assert _heard(listener, 5) == [str(claimed.turn_id)]
        assert await orm(lambda: TurnFollower.objects.count()) == 0
        await orm(lambda: AgentTurnEvent.objects.create(turn_id=claimed.turn_id, seq=4, event="delta", data="{}"))
        assert _heard(listener, 0.5) == []
    finally:
        listener.close()


@pytest.mark.postgres_only
async def test_a_follower_registering_while_a_writer_holds_the_turn_waits_for_its_commit(alice):
    """The gap a writer leaves between its trigger (no follower yet: no
    NOTIFY) and its commit: a final event is always written with an update
    of the turn's row, so registering waits on that row until the writer
    committed, and the follower's next read sees what it wrote."""
    claimed = await claim_turn("s1", "hello")
    writer = psycopg.connect(postgres_conninfo(database_settings()))
    try:
        writer.execute("UPDATE agent_turns SET status = 'committed' WHERE id = %s", [claimed.turn_id])
        writer.execute(
            "INSERT INTO agent_turn_events (turn_id, seq, event, data, created_at) VALUES (%s, 2, 'done', '{}', now())",
            [claimed.turn_id],
        )
        registering = asyncio.ensure_future(orm(follow, turn_id=claimed.turn_id))
        done, _ = await asyncio.wait({registering}, timeout=0.5)
        assert not done, "registered while the writer's trigger could not have seen it"
        writer.commit()
        await asyncio.wait_for(registering, 5)
        assert await orm(
            lambda: list(AgentTurnEvent.objects.filter(turn_id=claimed.turn_id).values_list("seq", flat=True))
        ) == [1, 2]
    finally:
        writer.close()


async def test_maintenance_removes_followers_a_dead_process_left(alice):
    claimed = await claim_turn("s1", "hello")

    def left_behind() -> None:
        TurnFollower.objects.create(
            id=uuid.uuid4(), turn_id=claimed.turn_id, created_at=timezone.now() - timedelta(hours=2)
        )
        TurnFollower.objects.create(id=uuid.uuid4(), turn_id=claimed.turn_id, created_at=timezone.now())

    await orm(left_behind)
    assert (await orm(maintenance_run)).followers_removed == 1
    assert await orm(lambda: TurnFollower.objects.count()) == 1


@pytest.mark.parametrize("end", ["commit in one statement", "commit under the lock", "abort"])
def test_a_final_event_is_written_after_its_turns_row_is_updated(alice, end):
    """What `follow` relies on to close the gap between a writer's trigger
    and its commit: the writer of a final event holds the turn's row first."""
    claimed = turn_claim(owner="alice", key="s1", request={"text": "hello"}, idempotency_key=None)
    assert isinstance(claimed, Claim)
    with CaptureQueriesContext(connection) as queries:
        if end == "commit in one statement":
            turn_commit(turn_id=claimed.turn_id, outcome=make_outcome(claimed), done_seq=2, claim=claimed)
        elif end == "commit under the lock":
            turn_commit(turn_id=claimed.turn_id, outcome=make_outcome(claimed))
        else:
            turn_abort(turn_id=claimed.turn_id, code="model_error", message="x", thread_id=claimed.thread_id)
    sent = "; ".join(q["sql"] for q in queries.captured_queries)
    assert 'INSERT INTO "agent_turn_events"' in sent, sent
    assert sent.index('UPDATE "agent_turns"') < sent.index('INSERT INTO "agent_turn_events"'), sent
