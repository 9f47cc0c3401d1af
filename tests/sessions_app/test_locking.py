"""The session row's lock as a value (sessions_app.locking): a LockedSession
comes only from the function that takes `SELECT … FOR UPDATE` inside the
caller's transaction, that one statement is what produces it, and the steps
that need the lock refuse the bare row."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from sessions_app.locking import LockedSession, session_create_locked, session_lock
from sessions_app.models import AgentSession
from sessions_app.services import revive_if_deleted
from turns_app.models import AgentTurn
from turns_app.services import claim_reads
from turns_app.services.abort import abort_locked
from turns_app.services.lease import expire_dead_turn
from turns_app.services.session_history import rewind_locked

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session() -> AgentSession:
    return AgentSession.objects.create(owner="alice", key="locked", graph="intake")


def test_the_lock_hands_out_a_locked_session_in_its_one_statement(session):
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        locked = session_lock(owner="alice", key="locked")
        assert isinstance(locked, LockedSession)
        assert locked.session.pk == session.pk and locked.now is not None
        by_id = session_lock(session_id=session.pk)
        assert by_id.session.pk == session.pk
    (first, second) = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    assert first.count("SELECT") == 1 and second.count("SELECT") == 1
    if connection.features.has_select_for_update:
        assert first.endswith("FOR UPDATE") and second.endswith("FOR UPDATE")


def test_no_lock_outside_a_transaction_and_no_query_to_find_out(session):
    with CaptureQueriesContext(connection) as queries, pytest.raises(RuntimeError, match=r"transaction.atomic"):
        session_lock(session_id=session.pk)
    with pytest.raises(RuntimeError, match=r"transaction.atomic"):
        session_create_locked(owner="alice", key="new")
    assert queries.captured_queries == []


def test_a_locked_session_cannot_be_made_or_changed_anywhere_else(session):
    with transaction.atomic():
        with pytest.raises(TypeError, match="session_lock"):
            LockedSession(session)
        with pytest.raises(TypeError, match="session_lock"):
            LockedSession(session, object())
        locked = session_lock(session_id=session.pk)
        with pytest.raises(dataclasses.FrozenInstanceError):
            locked.session = session  # type: ignore[misc]


# SQLite locks the whole database (an IMMEDIATE transaction), not a row.
@pytest.mark.postgres_only
def test_the_lock_is_held_until_the_transaction_ends(session):
    entered, release = threading.Event(), threading.Event()
    waited: list[bool] = []

    def other() -> None:
        try:
            entered.wait(10)
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '200ms'")
                try:
                    with transaction.atomic():
                        session_lock(session_id=session.pk)
                    waited.append(False)
                except Exception:
                    waited.append(True)
        finally:
            release.set()
            connection.close()

    thread = threading.Thread(target=other)
    thread.start()
    with transaction.atomic():
        session_lock(session_id=session.pk)
        entered.set()
        release.wait(10)
    thread.join(10)
    assert waited == [True]


def test_the_steps_under_the_lock_refuse_the_bare_row(session: AgentSession):
    """Each step that needs the lock takes a LockedSession (mypy says so);
    handed the row itself it fails before it writes anything."""
    turn = AgentTurn(session=session, epoch=1, number=1, base_version=0, graph="intake", request={})
    steps = [
        lambda: abort_locked(session, turn, code="x", message="x"),  # type: ignore[arg-type]
        lambda: expire_dead_turn(session),  # type: ignore[arg-type]
        lambda: claim_reads(session),  # type: ignore[arg-type]
        lambda: rewind_locked(session, None),  # type: ignore[arg-type]
        lambda: revive_if_deleted(session),  # type: ignore[arg-type]
    ]
    before = AgentSession.objects.get(pk=session.pk)
    for step in steps:
        with transaction.atomic(), pytest.raises(AttributeError, match=r"session|now"):
            step()
    after = AgentSession.objects.get(pk=session.pk)
    assert (after.version, after.updated_at, AgentTurn.objects.count()) == (before.version, before.updated_at, 0)
