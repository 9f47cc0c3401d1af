"""The admin pages render for staff, show what happened in a session, and
refuse everyone else. Sessions are made through the chat API."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from sessions_app.models import ApiKey
from sessions_app.services import session_create, session_delete
from tests.admin.conftest import admin_url, chat, checkpoint_rows, session_with_turns
from tests.fixtures.turns import transcript_of
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)


def text(response) -> str:
    return response.content.decode()


# --- rendering ------------------------------------------------------------------------


def test_changelist_lists_live_sessions(staff_client, api):
    session = session_with_turns(api, "s-list", turns=2)
    response = staff_client.get(admin_url("sessions_app_agentsession_changelist"))
    assert response.status_code == 200
    page = text(response)
    assert "s-list" in page and "alice" in page
    # The owner filter is a text box, not a list of every owner.
    assert 'name="owner"' in page
    row = response.context["cl"].result_list[0]
    assert (row.key, row.version, row.turn_count) == ("s-list", session.version, 2)


def test_session_page_shows_fields_transcript_turns_and_storage(staff_client, api):
    session = session_with_turns(api, "s-page", turns=3)
    turns = list(AgentTurn.objects.filter(session=session).order_by("number"))
    assert len(turns) == 3
    response = staff_client.get(admin_url("sessions_app_agentsession_change", session.pk))
    assert response.status_code == 200
    page = text(response)

    # Typed fields, as a table.
    assert session.fields["name"] == "Ada Lovelace"
    assert "<td>Ada Lovelace</td>" in page
    assert "<td>ada@example.com</td>" in page
    # The form spec.
    assert "preferred_date" in page and "the number of people in your party" in page
    # The transcript, user and assistant in order.
    messages = transcript_of(session)
    assert [m["role"] for m in messages[:2]] == ["user", "assistant"]
    positions = [page.index(escape(m["content"])) for m in messages]
    assert positions == sorted(positions)
    assert "name: Ada Lovelace" in page and "preferred date: 2031-01-02" in page
    assert page.count('class="agentsite-msg agentsite-msg-user"') == 3
    assert page.count('class="agentsite-msg agentsite-msg-assistant"') == 3
    # The graph, the head turn, and checkpoint storage: a session that never
    # paused has none (a finished run's state is its turn rows).
    assert "<td>intake</td>" in page or ">intake<" in page
    assert admin_url("turns_app_agentturn_change", session.head_turn_id) in page
    assert checkpoint_rows(session.id) == 0
    assert "0 rows, 0" in page
    # The turns inline: newest first, with links to the turn pages.
    for turn in turns:
        assert admin_url("turns_app_agentturn_change", turn.pk) in page
        assert turn.request_digest[:12] in page
    links = [page.index(admin_url("turns_app_agentturn_change", t.pk)) for t in turns]
    assert links == sorted(links, reverse=True)
    # Nothing to edit by hand: no save button, no input for the business columns.
    assert 'name="_save"' not in page
    assert 'name="fields"' not in page and 'name="version"' not in page
    # The hash of the key is not on the page either.
    assert ApiKey.objects.get(owner="alice").key_hash not in page


def test_turn_page_shows_request_and_result(staff_client, api):
    session = session_with_turns(api, "s-turn", turns=1)
    turn = AgentTurn.objects.get(session=session)
    response = staff_client.get(admin_url("turns_app_agentturn_change", turn.pk))
    assert response.status_code == 200
    page = text(response)
    assert "Ada Lovelace" in page  # the request
    result = json.loads(turn.result)
    assert f"&quot;version&quot;: {result['version']}" in page  # the committed body, indented
    assert f"&quot;turn_id&quot;: &quot;{turn.pk}&quot;" in page
    assert 'name="_save"' not in page
    listing = staff_client.get(admin_url("turns_app_agentturn_changelist"))
    assert listing.status_code == 200 and "s-turn" in text(listing)


def test_turn_admin_is_read_only(staff_client, api):
    session = session_with_turns(api, "s-ro", turns=1)
    turn = AgentTurn.objects.get(session=session)
    assert staff_client.get(admin_url("turns_app_agentturn_add")).status_code == 403
    assert staff_client.get(admin_url("turns_app_agentturn_delete", turn.pk)).status_code == 403
    before = turn.result
    response = staff_client.post(admin_url("turns_app_agentturn_change", turn.pk), {"status": "aborted"})
    assert response.status_code == 403
    turn.refresh_from_db()
    assert (turn.status, turn.result) == ("committed", before)
    assert staff_client.get(admin_url("sessions_app_agentsession_add")).status_code == 403
    response = staff_client.post(
        admin_url("sessions_app_agentsession_change", session.pk), {"key": "x", "version": "99"}
    )
    assert response.status_code == 403
    session.refresh_from_db()
    assert (session.key, session.version) == ("s-ro", 1)


def test_tombstone_hidden_by_default_and_shown_by_the_deleted_filter(staff_client, api):
    live = session_with_turns(api, "s-live", turns=1)
    gone = session_with_turns(api, "s-gone", turns=2)
    session_delete(session_id=gone.pk)
    url = admin_url("sessions_app_agentsession_changelist")

    def keys(query: str) -> set[str]:
        response = staff_client.get(url + query)
        assert response.status_code == 200
        return {s.key for s in response.context["cl"].result_list}

    assert keys("") == {"s-live"}
    assert keys("?state=live") == {"s-live"}
    assert keys("?state=deleted") == {"s-gone"}
    assert keys("?state=all") == {"s-live", "s-gone"}
    assert keys("?state=deleted&q=gone") == {"s-gone"}
    assert keys("?q=gone") == set()

    response = staff_client.get(admin_url("sessions_app_agentsession_change", gone.pk))
    assert response.status_code == 200
    page = text(response)
    assert "tombstone" in page and "No committed messages." in page
    assert live.key not in page


def test_filters_by_owner_stage_and_search(staff_client, api, api_bob):
    session_with_turns(api, "a-1", turns=1)
    session_with_turns(api_bob, "b-1", turns=1, owner="bob")
    session_create(owner="bob", key="b-2")
    url = admin_url("sessions_app_agentsession_changelist")

    def keys(query: str) -> set[str]:
        response = staff_client.get(url + query)
        assert response.status_code == 200
        return {s.key for s in response.context["cl"].result_list}

    assert keys("?owner=bob") == {"b-1", "b-2"}
    assert keys("?owner=alice") == {"a-1"}
    assert keys("?owner=nobody") == set()
    assert keys("?q=bob") == {"b-1", "b-2"}
    assert keys("?q=a-1") == {"a-1"}
    assert keys("?stage__exact=collecting&owner=bob") == {"b-1", "b-2"}
    assert keys("?stage__exact=complete") == set()
    # The owner box keeps the other filters when it submits.
    page = text(staff_client.get(url + "?state=all&owner=bob"))
    assert '<input type="hidden" name="state" value="all">' in page


def test_changelist_queries_do_not_grow_with_sessions(staff_client, django_assert_max_num_queries):
    url = admin_url("sessions_app_agentsession_changelist")

    def count_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            response = staff_client.get(url)
        assert response.status_code == 200
        return len(ctx.captured_queries)

    for i in range(2):
        session_create(owner=f"owner-{i}", key=f"few-{i}")
    few = count_queries()
    for i in range(40):
        session_create(owner=f"owner-{i % 7}", key=f"many-{i}")
    many = count_queries()
    assert many == few, (few, many)
    with django_assert_max_num_queries(6):
        response = staff_client.get(url)
    assert len(response.context["cl"].result_list) == 42


# --- API keys -------------------------------------------------------------------------


def test_api_key_pages_render_without_the_hash(staff_client, alice):
    key = ApiKey.objects.get(owner="alice")
    listing = staff_client.get(admin_url("sessions_app_apikey_changelist"))
    assert listing.status_code == 200
    page = text(listing)
    assert f"ask_{key.prefix}_" in page and "alice" in page
    assert key.key_hash not in page and alice not in page
    detail = staff_client.get(admin_url("sessions_app_apikey_change", key.pk))
    assert detail.status_code == 200
    assert key.key_hash not in text(detail) and alice not in text(detail)
    add = staff_client.get(admin_url("sessions_app_apikey_add"))
    assert add.status_code == 200
    assert 'name="owner"' in text(add) and 'name="key_hash"' not in text(add)
    assert 'name="prefix"' not in text(add)


# --- who may see it ------------------------------------------------------------------


ADMIN_PAGES = [
    "sessions_app_agentsession_changelist",
    "turns_app_agentturn_changelist",
    "sessions_app_apikey_changelist",
    "sessions_app_apikey_add",
]


@pytest.mark.parametrize("who", ["anonymous", "non-staff"])
def test_only_staff_get_in(client, django_user_model, api, who):
    session = session_with_turns(api, "s-private", turns=1)
    turn = AgentTurn.objects.get(session=session)
    if who == "non-staff":
        user = django_user_model.objects.create_user("visitor", password="pw")
        client.force_login(user)
    urls = [admin_url(name) for name in ADMIN_PAGES] + [
        admin_url("sessions_app_agentsession_change", session.pk),
        admin_url("sessions_app_agentsession_delete", session.pk),
        admin_url("sessions_app_agentsession_set_fields", session.pk),
        admin_url("turns_app_agentturn_change", turn.pk),
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/"), url
        assert "Ada Lovelace" not in text(response)
    # A POST (delete) is refused too, and deletes nothing.
    response = client.post(admin_url("sessions_app_agentsession_delete", session.pk), {"post": "yes"})
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    session.refresh_from_db()
    assert session.deleted_at is None and session.version == 1


# --- set fields through the service -----------------------------------------------------


def test_set_fields_goes_through_the_service(staff_client, api):
    session = session_with_turns(api, "s-set", turns=1)
    url = admin_url("sessions_app_agentsession_set_fields", session.pk)
    form_page = staff_client.get(url)
    assert form_page.status_code == 200
    assert 'value="Ada Lovelace"' in text(form_page)
    base = {"_expected_version": str(session.version), "name": "Ada Lovelace"}

    # An invalid value is refused and reported; nothing changes.
    bad = staff_client.post(url, {**base, "party_size": "many"})
    assert bad.status_code == 200
    assert "must be a whole number" in text(bad)
    session.refresh_from_db()
    assert (session.version, "party_size" in session.fields) == (1, False)

    # A valid change is applied by the service and bumps the version.
    ok = staff_client.post(url, {**base, "party_size": "4", "topic": "booking"}, follow=True)
    assert ok.status_code == 200
    session.refresh_from_db()
    assert session.version == 2
    assert session.fields["party_size"] == 4 and session.fields["topic"] == "booking"
    assert session.fields["name"] == "Ada Lovelace"
    assert "version 2" in text(ok)

    # The version the operator saw is checked: a stale form is refused.
    stale = staff_client.post(url, {**base, "party_size": "5"})
    assert stale.status_code == 200
    assert "Not saved" in text(stale) and "version 2" in text(stale)
    session.refresh_from_db()
    assert (session.version, session.fields["party_size"]) == (2, 4)

    # An emptied input clears the field.
    cleared = staff_client.post(
        url, {"_expected_version": "2", "name": "Ada Lovelace", "party_size": "", "topic": "booking"}
    )
    assert cleared.status_code == 302
    session.refresh_from_db()
    assert session.version == 3 and "party_size" not in session.fields

    # The next chat turn sees the fields set in the admin.
    reply = chat(api, "s-set", "ada@example.com")
    assert reply["fields"]["topic"] == "booking" and reply["version"] == 4
