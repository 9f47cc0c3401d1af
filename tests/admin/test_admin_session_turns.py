"""The session admin is sessions_app's and imports nothing of turns_app; the
turn parts of a session's page (the inline, the turn links, the transcript,
the checkpoint storage, the delete pages' counts) reach it only through the
`SessionTurns` slot that turns_app's admin fills."""

from __future__ import annotations

import pytest
from django.contrib import admin

from sessions_app.admin import session_turns as slot
from sessions_app.admin.sessions import AgentSessionAdmin
from sessions_app.models import AgentSession
from tests.admin.conftest import admin_url, checkpoint_rows, paused_session
from tests.test_architecture import module_edges
from turns_app.admin.session_turns import TurnsOfSessions
from turns_app.admin.turns import AgentTurnInline
from turns_app.models import AgentTurn


def test_sessions_app_admin_imports_no_turns_app_module():
    edges = module_edges()
    admin_modules = {m for m in edges if m == "sessions_app.admin" or m.startswith("sessions_app.admin.")}
    # The import graph sees every module of the package (else this passes vacuously).
    assert {
        "sessions_app.admin",
        "sessions_app.admin.sessions",
        "sessions_app.admin.api_keys",
        "sessions_app.admin.filters",
        "sessions_app.admin.forms",
        "sessions_app.admin.session_turns",
        "sessions_app.admin.set_fields",
    } <= admin_modules
    wrong = sorted(
        f"{m} -> {t}" for m in admin_modules for t in edges[m] if t.partition(".")[0] not in {"core", "sessions_app"}
    )
    assert wrong == []
    # And turns_app's admin is what fills the slot.
    assert "sessions_app.admin.session_turns" in edges["turns_app.admin.session_turns"]


def test_the_registered_session_admin_is_sessions_apps_and_turns_app_fills_its_slot():
    assert type(admin.site._registry[AgentSession]) is AgentSessionAdmin
    assert isinstance(slot.session_turns(), TurnsOfSessions)
    assert slot.session_turns().inlines == (AgentTurnInline,)


@pytest.mark.django_db(transaction=True)
def test_the_session_page_shows_the_turns_from_the_slot(staff_client, api):
    session = paused_session(api, "s-slot")
    turns = list(AgentTurn.objects.filter(session=session))
    rows = checkpoint_rows(session.id)
    assert turns and rows > 0
    response = staff_client.get(admin_url("sessions_app_agentsession_change", session.pk))
    assert response.status_code == 200
    page = response.content.decode()
    # The inline (one formset, of turns), the head turn's link, the transcript, the storage.
    assert [formset.opts.__class__ for formset in response.context["inline_admin_formsets"]] == [AgentTurnInline]
    for turn in turns:
        assert admin_url("turns_app_agentturn_change", turn.pk) in page
    assert 'class="agentsite-msg agentsite-msg-user"' in page
    assert f"{rows} rows," in page
    # The delete page counts the turns through the slot too.
    response = staff_client.get(admin_url("sessions_app_agentsession_delete", session.pk))
    assert f"turns: {len(turns)}" in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_without_a_turns_app_the_session_page_has_no_turn_parts(staff_client, api, monkeypatch):
    """The slot is the only way turns reach the page: empty, they are gone."""
    session = paused_session(api, "s-no-slot")
    monkeypatch.setattr(slot, "_registered", None)
    response = staff_client.get(admin_url("sessions_app_agentsession_change", session.pk))
    assert response.status_code == 200
    page = response.content.decode()
    assert response.context["inline_admin_formsets"] == []
    assert "turns_app/agentturn/" not in page
    assert "No committed messages." in page
    assert "0 rows, 0" in page
