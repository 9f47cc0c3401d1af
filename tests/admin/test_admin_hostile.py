"""Admin pages against hostile data: list pages load only the columns they
show, and stored text with lone surrogates (SQLite keeps them; older
versions let them in) still renders (docs/api.md, "Limits and hostile clients")."""

from __future__ import annotations

import time
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import AgentSession
from tests.admin.conftest import admin_url
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

HEAVY_MARK = "heavy-transcript-marker"


def heavy_session(key: str, megabytes: float) -> AgentSession:
    """A session whose transcript (its turns' messages) and form are large,
    with three turns."""
    content = HEAVY_MARK + "x" * int(megabytes * 1_000_000 / 3)
    session = AgentSession.objects.create(
        owner="alice",
        key=key,
        form=[{"name": "name", "type": "string", "required": True, "description": HEAVY_MARK}],
        metadata={"note": HEAVY_MARK},
        turn_count=3,
        version=3,
    )
    parent = None
    for number in range(1, 4):
        parent = AgentTurn.objects.create(
            session=session,
            epoch=1,
            number=number,
            base_version=number - 1,
            parent_id=parent,
            status=AgentTurn.Status.COMMITTED,
            request={"text": "hi"},
            result='{"reply": "ok"}',
            request_digest=uuid.uuid4().hex,
            messages=[{"type": "human", "data": {"content": content}}],
        ).id
    AgentSession.objects.filter(pk=session.pk).update(head_turn_id=parent)
    return session


@pytest.mark.parametrize("changelist", ["sessions_app_agentsession_changelist", "turns_app_agentturn_changelist"])
def test_list_pages_do_not_load_transcripts_or_forms(staff_client, changelist):
    for i in range(4):
        heavy_session(f"heavy-{i}", megabytes=2)
    staff_client.get(admin_url(changelist))  # templates compiled, caches warm
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        response = staff_client.get(admin_url(changelist))
    elapsed = time.perf_counter() - started
    assert response.status_code == 200
    assert HEAVY_MARK not in response.content.decode()
    selects = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    listing = [sql for sql in selects if "agent_sessions" in sql]
    assert listing, selects
    for sql in listing:
        for column in ("form", "fields", "metadata", "interrupt"):
            assert f'"agent_sessions"."{column}"' not in sql, sql
        for column in ("messages", "request", "result", "values"):
            assert f'"agent_turns"."{column}"' not in sql, sql
    print(f"\n{changelist}: {len(queries)} queries, {elapsed * 1000:.0f} ms")


@pytest.mark.sqlite_only  # PostgreSQL cannot hold such a row: nothing to render there
def test_pages_render_stored_lone_surrogates(staff_client):
    """SQLite stores them (PostgreSQL refuses them at the write); the API
    refuses them now, but rows written earlier must still be readable."""
    session = AgentSession.objects.create(
        owner="alice",
        key="legacy",
        form=[{"name": "name", "type": "string", "required": True, "description": "x\udc00"}],
        fields={"name": "a\udc00b"},
        metadata={"m": "\ud800"},
    )
    said = AgentTurn.objects.create(
        session=session,
        epoch=1,
        number=1,
        base_version=0,
        status=AgentTurn.Status.COMMITTED,
        request={"text": "hi \udc00"},
        messages=[{"type": "human", "data": {"content": "hi \udc00"}}],
        request_digest="1" * 64,
    )
    AgentSession.objects.filter(pk=session.pk).update(head_turn_id=said.id)
    turn = AgentTurn.objects.create(
        session=session,
        epoch=1,
        number=2,
        base_version=1,
        status=AgentTurn.Status.ABORTED,
        request={"text": "a\udc00"},
        error={"code": "model_error", "message": "\ud800"},
        request_digest="0" * 64,
    )
    for url, shows_text in (
        (admin_url("sessions_app_agentsession_change", session.pk), True),
        (admin_url("sessions_app_agentsession_set_fields", session.pk), True),
        (admin_url("sessions_app_agentsession_changelist"), False),
        (admin_url("turns_app_agentturn_change", turn.pk), True),
        (admin_url("turns_app_agentturn_changelist"), False),
    ):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        # The stored text is shown, its surrogates as U+FFFD.
        assert ("\ufffd" in response.content.decode()) == shows_text, url


def test_delete_page_says_what_is_kept(staff_client):
    session = AgentSession.objects.create(owner="alice", key="to-delete", form=[], metadata={"a": 1})
    page = staff_client.get(admin_url("sessions_app_agentsession_delete", session.pk)).content.decode()
    assert "everything\n      the client supplied: its form, typed fields and metadata" in page
    assert "only its owner, key, epoch,\n      version and timestamps" in page
