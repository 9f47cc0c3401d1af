"""Deleting from the admin goes through `session_delete`: the checkpoint rows
go, the turns go, a tombstone stays; a turn that was running cannot commit
afterwards. API keys: created once, stored as a hash, revoked."""

from __future__ import annotations

import hashlib

import pytest

from core.errors import StaleTurn, Unauthorized
from sessions_app.models import AgentSession, ApiKey
from sessions_app.services import api_key_authenticate
from tests.admin.conftest import admin_url, chat, checkpoint_rows, paused_session, session_with_turns
from tests.fixtures.turns import make_outcome
from turns_app.models import AgentTurn
from turns_app.services import turn_claim, turn_commit

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "sessions_app_agentsession_changelist"


def assert_tombstone(before: AgentSession) -> AgentSession:
    after = AgentSession.objects.get(pk=before.pk)
    assert after.deleted_at is not None
    assert (after.epoch, after.version) == (before.epoch + 1, before.version)
    assert after.fields == {} and after.head_turn_id is None and after.interrupt is None
    assert after.turn_count == 0
    assert not AgentTurn.objects.filter(session=after).exists()
    assert checkpoint_rows(after.id) == 0
    return after


def test_delete_one_session_purges_checkpoints_and_keeps_a_tombstone(staff_client, api):
    session = session_with_turns(api, "s-del", turns=3)
    # Finished turns leave no checkpoints; a paused run does: it waits in the
    # checkpointer's tables, and its session's delete must purge them.
    paused = paused_session(api, "s-paused")
    other = paused_session(api, "s-keep")
    assert checkpoint_rows(paused.id) > 0
    other_rows = checkpoint_rows(other.id)
    url = admin_url("sessions_app_agentsession_delete", session.pk)

    confirm = staff_client.get(url)
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "tombstone" in page
    assert "turns: 3" in page
    assert "checkpoint rows: 0" in page
    assert "fields: " in page and "name" in page
    assert f"epoch {session.epoch + 1}, version {session.version}" in page
    # Nothing is deleted by looking at the confirmation page.
    assert AgentTurn.objects.filter(session=session).count() == 3
    paused_url = admin_url("sessions_app_agentsession_delete", paused.pk)
    assert f"checkpoint rows: {checkpoint_rows(paused.id)}" in staff_client.get(paused_url).content.decode()

    response = staff_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert response["Location"] == admin_url(CHANGELIST)
    tomb = assert_tombstone(session)
    assert staff_client.post(paused_url, {"post": "yes"}).status_code == 302
    assert_tombstone(paused)
    # The other session is untouched.
    assert checkpoint_rows(other.id) == other_rows
    assert AgentTurn.objects.filter(session=other).count() == 1

    # Deleting the tombstone again succeeds and changes nothing.
    again = staff_client.post(url, {"post": "yes"})
    assert again.status_code == 302
    still = AgentSession.objects.get(pk=session.pk)
    assert (still.epoch, still.version, still.deleted_at) == (tomb.epoch, tomb.version, tomb.deleted_at)

    # A chat on the same key afterwards starts the new epoch from nothing
    # (re-created at the next version, then the turn's commit).
    reply = chat(api, "s-del", "hello", idem="s-del-1")
    assert (reply["epoch"], reply["version"]) == (tomb.epoch, tomb.version + 2)
    assert "name" not in reply["fields"]


def test_bulk_delete_action_purges_every_selected_session(staff_client, api):
    first = paused_session(api, "bulk-1")
    second = session_with_turns(api, "bulk-2", turns=3)
    kept = paused_session(api, "bulk-keep")
    kept_rows = checkpoint_rows(kept.id)
    assert checkpoint_rows(first.id) > 0 and kept_rows > 0
    url = admin_url(CHANGELIST)
    selection = {"action": "delete_selected", "_selected_action": [str(first.pk), str(second.pk)]}

    confirm = staff_client.post(url, selection)
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "tombstone" in page and "bulk-1" in page and "bulk-2" in page
    assert "turns: 1" in page and "turns: 3" in page
    assert checkpoint_rows(first.id) > 0  # not yet

    response = staff_client.post(url, {**selection, "post": "yes"})
    assert response.status_code == 302
    assert_tombstone(first)
    assert_tombstone(second)
    assert AgentSession.objects.get(pk=kept.pk).deleted_at is None
    assert checkpoint_rows(kept.id) == kept_rows

    # The tombstones are under the "deleted" filter, and can be deleted again.
    listed = staff_client.get(url + "?state=deleted")
    assert {s.key for s in listed.context["cl"].result_list} == {"bulk-1", "bulk-2"}
    again = staff_client.post(url + "?state=deleted", {**selection, "post": "yes"})
    assert again.status_code == 302
    assert AgentSession.objects.get(pk=first.pk).epoch == first.epoch + 1


def test_turn_running_during_an_admin_delete_cannot_commit(staff_client, api):
    session = session_with_turns(api, "s-stale", turns=1)
    claim = turn_claim(
        owner="alice",
        key="s-stale",
        request={"text": "my email is ada@example.com", "client_mode": "chat", "need_form_update": True},
        idempotency_key="late",
    )
    response = staff_client.post(admin_url("sessions_app_agentsession_delete", session.pk), {"post": "yes"})
    assert response.status_code == 302
    outcome = make_outcome(
        claim,
        reply="too late",
        field_changes={"email": "ada@example.com"},
        fields={"name": "Ada Lovelace", "email": "ada@example.com"},
    )
    with pytest.raises(StaleTurn):
        turn_commit(turn_id=claim.turn_id, outcome=outcome)
    tomb = assert_tombstone(session)
    assert tomb.active_turn_id is None


# --- API keys ------------------------------------------------------------------------------


def test_create_api_key_shows_it_once_and_stores_only_the_hash(staff_client):
    response = staff_client.post(admin_url("sessions_app_apikey_add"), {"owner": "carol"})
    assert response.status_code == 200
    raw = response.context["raw_key"]
    assert raw.startswith("ask_") and raw in response.content.decode()
    assert "shown only this once" in response.content.decode()
    assert "no-store" in response["Cache-Control"]

    key = ApiKey.objects.get(owner="carol")
    assert key.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw.split("_")[1] == key.prefix
    # Nowhere in the row, nowhere on the admin's pages afterwards.
    stored = " ".join(str(getattr(key, f.attname)) for f in ApiKey._meta.concrete_fields)
    assert raw not in stored
    for url in (admin_url("sessions_app_apikey_changelist"), admin_url("sessions_app_apikey_change", key.pk)):
        page = staff_client.get(url).content.decode()
        assert raw not in page and key.key_hash not in page
    # The key works.
    assert api_key_authenticate(raw=raw).owner == "carol"

    # A blank owner creates nothing.
    blank = staff_client.post(admin_url("sessions_app_apikey_add"), {"owner": "  "})
    assert blank.status_code == 200 and "raw_key" not in blank.context
    assert ApiKey.objects.count() == 1


def test_revoke_action(staff_client, make_key):
    raw = make_key("dave")
    other = make_key("erin")
    key = ApiKey.objects.get(owner="dave")
    response = staff_client.post(
        admin_url("sessions_app_apikey_changelist"),
        {"action": "revoke", "_selected_action": [str(key.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Revoked 1 API key" in response.content.decode()
    key.refresh_from_db()
    assert key.revoked_at is not None
    with pytest.raises(Unauthorized):
        api_key_authenticate(raw=raw)
    assert api_key_authenticate(raw=other).owner == "erin"
    # Revoking again is harmless; the list filters by state.
    staff_client.post(
        admin_url("sessions_app_apikey_changelist"),
        {"action": "revoke", "_selected_action": [str(key.pk)]},
    )
    listed = staff_client.get(admin_url("sessions_app_apikey_changelist") + "?state=revoked")
    assert [k.owner for k in listed.context["cl"].result_list] == ["dave"]
    # Keys are revoked, never deleted.
    assert staff_client.get(admin_url("sessions_app_apikey_delete", key.pk)).status_code == 403
