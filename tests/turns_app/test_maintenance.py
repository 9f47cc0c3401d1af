"""The periodic maintenance's work, on the suite's database: idle sessions
expire through `session_delete` (tombstone and purge), old tombstones are
removed, and each is off or bounded as its setting says. The in-server
schedule and the one-leader lock are tests/system/test_maintenance_in_server.py."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app.models import AgentSession
from sessions_app.services import session_delete
from tests.admin.conftest import checkpoint_rows, session_with_turns
from tests.fixtures.runners import orm, run_in_new_loop
from tests.fixtures.turns import claim_turn
from turns_app.maintenance import maintenance_run
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)


def age(key: str, *, days: float, field: str = "updated_at") -> None:
    # QuerySet.update: auto_now would otherwise put updated_at back to now.
    AgentSession.objects.filter(key=key).update(**{field: timezone.now() - timedelta(days=days)})


def test_idle_sessions_expire_through_the_delete_service(api, settings):
    settings.AGENT_SESSION_IDLE_DAYS = 7
    idle = session_with_turns(api, "idle-one", turns=2)
    fresh = session_with_turns(api, "fresh-one", turns=2)
    age("idle-one", days=8)
    age("fresh-one", days=6)

    report = maintenance_run()
    assert report.sessions_expired == 1
    idle.refresh_from_db()
    assert idle.is_deleted and idle.epoch == 2  # a tombstone, as a DELETE leaves it
    assert idle.version == 2 and idle.fields == {} and idle.head_turn_id is None
    assert not AgentTurn.objects.filter(session_id=idle.pk).exists()
    assert checkpoint_rows(idle.pk) == 0
    fresh.refresh_from_db()
    assert not fresh.is_deleted and AgentTurn.objects.filter(session_id=fresh.pk).count() == 2


def test_idle_expiry_is_off_by_default(api, settings):
    assert settings.AGENT_SESSION_IDLE_DAYS == 0
    session_with_turns(api, "ancient", turns=1)
    age("ancient", days=3650)
    assert maintenance_run().sessions_expired == 0
    assert not AgentSession.objects.get(key="ancient").is_deleted


def test_a_session_used_after_it_was_picked_is_kept(api):
    """The expiry re-checks under the row lock: a chat that came in between
    the pick and the delete wins."""
    session = session_with_turns(api, "busy-again", turns=1)
    cutoff = timezone.now() - timedelta(days=7)
    assert session_delete(session_id=session.pk, idle_before=cutoff) is None
    assert not AgentSession.objects.get(pk=session.pk).is_deleted
    age("busy-again", days=8)
    assert session_delete(session_id=session.pk, idle_before=cutoff) is not None


def test_old_tombstones_are_removed(api, settings):
    assert settings.AGENT_TOMBSTONE_DAYS == 30  # the default
    old = session_with_turns(api, "old-tomb", turns=1)
    recent = session_with_turns(api, "recent-tomb", turns=1)
    live = session_with_turns(api, "live", turns=1)
    for session in (old, recent):
        session_delete(session_id=session.pk)
    age("old-tomb", days=31, field="deleted_at")
    age("recent-tomb", days=29, field="deleted_at")
    age("live", days=400)  # idle, but idle expiry is off

    report = maintenance_run()
    assert report.tombstones_removed == 1
    assert not AgentSession.objects.filter(pk=old.pk).exists()
    assert AgentSession.objects.get(pk=recent.pk).is_deleted
    assert not AgentSession.objects.get(pk=live.pk).is_deleted


async def test_a_removed_tombstones_key_starts_afresh(api, settings):
    await api.chat("reborn", "hello")
    assert (await api.call("DELETE", "/sessions/reborn")).status_code == 204
    await orm(lambda: age("reborn", days=31, field="deleted_at"))
    assert (await orm(maintenance_run)).tombstones_removed == 1
    assert (await api.call("DELETE", "/sessions/reborn")).status_code == 404
    answer = await api.chat("reborn", "hello")
    assert answer.status_code == 200
    assert answer.json()["epoch"] == 1 and answer.json()["version"] == 1


def test_tombstone_removal_can_be_turned_off(api, settings):
    settings.AGENT_TOMBSTONE_DAYS = 0
    gone = session_with_turns(api, "kept-tomb", turns=1)
    session_delete(session_id=gone.pk)
    age("kept-tomb", days=3650, field="deleted_at")
    assert maintenance_run().tombstones_removed == 0
    assert AgentSession.objects.filter(pk=gone.pk).exists()


def test_a_dead_lease_is_aborted_by_maintenance(api, settings):
    settings.AGENT_TURN_LEASE_SECONDS = 0.05
    claim = run_in_new_loop(lambda: claim_turn("dead-lease", "hello"))
    time.sleep(0.1)
    assert maintenance_run().turns_expired == 1
    turn = AgentTurn.objects.get(pk=claim.turn_id)
    assert turn.status == AgentTurn.Status.ABORTED and turn.error["code"] == "lease_expired"
