"""A session's form belongs to graphs that fill fields (a `fields` channel):
a booking session gets none, however it is created, and the admin does not
list a form nobody fills as missing (docs/graphs.md, "Bring your own graph")."""

from __future__ import annotations

import json

import pytest

from sessions_app.models import AgentSession
from sessions_app.services import default_form
from tests.admin.conftest import admin_url, paused_session
from tests.fixtures.runners import run_in_new_loop

pytestmark = pytest.mark.django_db(transaction=True)


def body(response) -> dict:
    return json.loads(response.content)


def created(api, payload: dict) -> dict:
    response = run_in_new_loop(lambda: api.call("POST", "/sessions", payload))
    assert response.status_code == 201, response.content
    return body(response)


def test_a_session_carries_a_form_only_when_its_graph_fills_fields(api, settings):
    assert created(api, {"key": "b1", "graph": "booking"})["form"] == []
    assert created(api, {"key": "i1", "graph": "intake"})["form"] == default_form()
    # The first message on a new key creates the session on AGENT_GRAPH.
    settings.AGENT_GRAPH = "booking"
    assert run_in_new_loop(lambda: api.chat("b2", "hello")).status_code == 200
    assert AgentSession.objects.get(key="b2").form == []
    # A deleted key comes back on AGENT_GRAPH, with its form (none here).
    assert run_in_new_loop(lambda: api.call("DELETE", "/sessions/i1")).status_code == 204
    assert run_in_new_loop(lambda: api.chat("i1", "hello")).status_code == 200
    revived = AgentSession.objects.get(key="i1")
    assert (revived.graph, revived.form) == ("booking", [])
    # A form given explicitly is kept as given.
    assert created(api, {"key": "b3", "graph": "booking", "form": default_form()})["form"] == default_form()


def test_the_admin_lists_no_missing_fields_for_a_booking_session(api, staff_client):
    session = paused_session(api, "b1")
    page = staff_client.get(admin_url("sessions_app_agentsession_change", session.pk)).content.decode()
    assert 'class="agentsite-missing"' not in page and "The booking graph fills no fields." in page
    # One made before forms went by graph keeps the default form: still nothing listed as missing.
    AgentSession.objects.filter(pk=session.pk).update(form=default_form())
    page = staff_client.get(admin_url("sessions_app_agentsession_change", session.pk)).content.decode()
    assert 'class="agentsite-missing"' not in page and "The booking graph fills no fields." in page
    # An intake session's required fields still show as missing.
    intake = created(api, {"key": "i1", "graph": "intake"})
    intake_row = AgentSession.objects.get(key="i1")
    assert intake["form"]
    page = staff_client.get(admin_url("sessions_app_agentsession_change", intake_row.pk)).content.decode()
    assert 'class="agentsite-missing"' in page
