"""Bounds on what one owner can make the service hold and send: lists leave
heavy fields out, a per-owner session quota, and delete keeps nothing the
client supplied (docs/api.md, "Sessions")."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import AgentSession
from tests.api.test_bad_input import assert_error, state
from tests.fixtures.runners import orm

pytestmark = pytest.mark.django_db(transaction=True)


def big_form() -> list[dict]:
    return [
        {
            "name": f"f{i}",
            "type": "enum",
            "required": True,
            "description": "d" * 300,
            "enum": [f"{'o' * 150}{j}" for j in range(6)],
        }
        for i in range(50)
    ]


async def test_session_lists_leave_form_fields_and_metadata_out(api):
    for i in range(5):
        response = await api.call(
            "POST", "/sessions", {"key": f"k{i}", "form": big_form(), "metadata": {"note": "m" * 10_000}}
        )
        assert response.status_code == 201, response.content[:300]
    one = await api.call("GET", "/sessions/k0")
    assert len(one.content) > 50_000  # the details still have everything

    response = await api.call("GET", "/sessions?limit=500")
    assert response.status_code == 200
    page = json.loads(response.content)
    assert page["count"] == 5 and len(page["items"]) == 5
    for item in page["items"]:
        assert set(item) == {"id", "key", "stage", "version", "epoch", "turn_count", "created_at", "updated_at"}
    print(
        f"\nlist of 5 sessions with 64 KB forms: {len(response.content)} bytes "
        f"(one session's details: {len(one.content)} bytes)"
    )
    assert len(response.content) < 2_000

    def page_queries() -> list[str]:
        from sessions_app.selectors import session_page

        with CaptureQueriesContext(connection) as queries:
            session_page(owner="alice", limit=500, offset=0)
        return [q["sql"] for q in queries.captured_queries]

    listing = [sql for sql in await orm(page_queries) if "LIMIT" in sql]
    assert listing, listing
    for column in ("form", "fields", "metadata", "snapshot"):
        assert f'"agent_sessions"."{column}"' not in listing[0], listing[0]


async def test_session_quota_answers_429_for_explicit_and_implicit_creates(api, api_bob, script, settings):
    settings.AGENT_MAX_SESSIONS_PER_OWNER = 3
    for i in range(3):
        assert (await api.call("POST", "/sessions", {"key": f"k{i}"})).status_code == 201
    before = await state()
    error = assert_error(await api.call("POST", "/sessions", {"key": "k3"}), 429, "too_many_sessions")
    assert error["details"] == {"limit": 3}
    # A chat on a new key creates a session too.
    assert_error(await api.chat("k4", "hello"), 429, "too_many_sessions")
    assert script.count() == 0
    assert await state() == before
    # Existing sessions still chat; other owners have their own quota.
    assert (await api.chat("k0", "hello")).status_code == 200
    assert (await api_bob.call("POST", "/sessions", {"key": "k0"})).status_code == 201
    # A delete frees a place; reviving a tombstone takes one.
    assert (await api.call("DELETE", "/sessions/k1")).status_code == 204
    assert (await api.call("POST", "/sessions", {"key": "k5"})).status_code == 201
    assert_error(await api.chat("k1", "hello"), 429, "too_many_sessions")


async def test_delete_keeps_nothing_the_client_supplied(api, script):
    form = [{"name": "ssn", "type": "string", "required": True}]
    created = await api.call("POST", "/sessions", {"key": "s1", "form": form, "metadata": {"ssn": "123-45-6789"}})
    assert created.status_code == 201
    assert (await api.chat("s1", "ssn: 123-45-6789")).status_code == 200
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204

    row = await orm(lambda: AgentSession.objects.values().get(key="s1"))
    assert "123-45-6789" not in json.dumps(row, default=str), row
    assert row["form"] == [] and row["metadata"] == {} and row["fields"] == {} and row["head_turn_id"] is None
    assert row["deleted_at"] is not None and row["epoch"] == 2 and row["version"] == 1

    # A later chat on the key starts from the default form, without the old metadata.
    response = await api.chat("s1", "hello")
    assert response.status_code == 200, response.content
    info = json.loads((await api.call("GET", "/sessions/s1")).content)
    assert info["metadata"] == {} and "123-45-6789" not in json.dumps(info)
    assert [spec["name"] for spec in info["form"]][:2] == ["name", "email"]
    assert info["epoch"] == 2
