"""A turn's final event against the run's own event batches, which are
written outside the session's lock: a cancel (or an expiry, or the start-up
abort) writes the `error` while a batch of the run is in flight, or before a
late one lands. Whatever the order, the log ends in exactly one final
event, and every reader — re-attach from any id, a join — gets it
(docs/turn-protocol.md, "Cancel"; docs/storage.md, "Event log")."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from django.db import close_old_connections, connection, transaction

from tests.fixtures.runners import orm
from tests.fixtures.turns import claim_turn
from turns_app.events import follow_stored
from turns_app.models import AgentTurnEvent
from turns_app.services import events_append, turn_cancel
from turns_app.services.event_rows import write_events
from turns_app.types import TERMINAL_EVENTS, TurnEvent

pytestmark = pytest.mark.django_db(transaction=True)

CEILING = 30.0  # seconds: the machine may be loaded; an event ends every wait long before


def deltas(first: int, last: int) -> list[TurnEvent]:
    return [TurnEvent(seq, "delta", f'{{"text": "t{seq}"}}') for seq in range(first, last + 1)]


def stored(turn_id) -> list[tuple[int, str]]:
    return list(AgentTurnEvent.objects.filter(turn_id=turn_id).order_by("seq").values_list("seq", "event"))


async def read_all(turn_id, after: int) -> list[TurnEvent]:
    return [event async for event in follow_stored(turn_id, after)]


async def assert_every_reader_ends_once(turn_id, ids_a_client_may_hold) -> None:
    from langgraph_app.runs import final_event

    for after in ids_a_client_may_hold:
        got = await read_all(turn_id, after)
        finals = [e for e in got if e.event in TERMINAL_EVENTS]
        assert len(finals) == 1 and got[-1] is finals[0], (after, got)
        assert finals[0].event == "error" and "turn_cancelled" in finals[0].data
        assert all(e.id > after for e in got[:-1]), (after, got)
    # The protocol's join and cancel?wait=1 wait for this final event.
    assert (await final_event(turn_id)).event == "error"


async def test_a_batch_landing_after_a_cancel_stays_before_its_error(alice):
    """The run had shown deltas 2 and 3 (shown before written) when the
    cancel aborted the turn; their batch lands after the cancel's commit."""
    claim = await claim_turn("late-batch", "hello")
    await orm(turn_cancel, owner="alice", key="late-batch", turn_id=claim.turn_id)
    assert await orm(events_append, turn_id=claim.turn_id, events=deltas(2, 3)) is not None
    log = await orm(stored, turn_id=claim.turn_id)
    assert [event for _, event in log].count("error") == 1, log
    assert log[-1][1] == "error", log
    # A client holds any id it was shown live, written or not.
    await assert_every_reader_ends_once(claim.turn_id, range(5))


async def test_the_error_of_a_cancel_never_shares_an_id_the_run_showed(alice):
    """The cancel cannot know which ids the run has shown but not written;
    a client that saw delta N and re-attaches with Last-Event-ID N must
    still get the error, so the error's id is none the run can show."""
    claim = await claim_turn("unwritten", "hello")
    await orm(events_append, turn_id=claim.turn_id, events=deltas(2, 2))
    await orm(turn_cancel, owner="alice", key="unwritten", turn_id=claim.turn_id)
    # Shown live, never written (the run stopped before its next batch).
    await assert_every_reader_ends_once(claim.turn_id, range(40))


@pytest.mark.postgres_only
async def test_a_cancel_while_a_batch_is_in_flight_keeps_its_error(alice):
    """PostgreSQL: the run's batch has inserted its rows but not committed
    when the cancel writes the `error`; the batch then commits. The error
    must not be the row ON CONFLICT DO NOTHING skips."""
    claim = await claim_turn("in-flight", "hello")
    inserted, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def batch() -> None:
        try:
            with transaction.atomic(durable=True):
                write_events(claim.turn_id, deltas(2, 4))
                inserted.set()
                assert release.wait(CEILING)
        except BaseException as exc:  # reported by the test
            failures.append(exc)
        finally:
            close_old_connections()
            connection.close()

    def cancel() -> None:
        try:
            turn_cancel(owner="alice", key="in-flight", turn_id=claim.turn_id)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    batch_thread = threading.Thread(target=batch)
    batch_thread.start()
    assert inserted.wait(CEILING)
    cancel_thread = threading.Thread(target=cancel)
    cancel_thread.start()
    # Let the cancel get as far as it can while the batch is open: it either
    # finishes, or waits on the batch's uncommitted rows.
    deadline = time.monotonic() + CEILING
    while cancel_thread.is_alive() and not await orm(_a_backend_waits_on_a_lock):
        assert time.monotonic() < deadline, "the cancel neither finished nor waited"
        await asyncio.sleep(0.01)
    release.set()
    batch_thread.join(CEILING)
    cancel_thread.join(CEILING)
    assert not failures, failures
    log = await orm(stored, turn_id=claim.turn_id)
    assert [event for _, event in log].count("error") == 1, log
    await assert_every_reader_ends_once(claim.turn_id, range(6))


def _a_backend_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] > 0
