"""A session re-created on a deleted key — by an explicit create or by a
chat — is a new session on the tombstone's row (docs/api.md, "Sessions"):
nothing the client sent or the turns wrote comes back, `created_at` is the
re-creation's; kept are the row's `id`, the epoch the delete moved and
the version, moved on by the re-creation, so an If-Match from before the
delete cannot match. Through the API, on both databases."""

from __future__ import annotations

from datetime import datetime

import pytest

from sessions_app.models import AgentSession

pytestmark = pytest.mark.django_db(transaction=True)

FORM = [{"name": "city", "type": "string", "required": True}]


async def an_old_session(api) -> dict:
    created = await api.call("POST", "/sessions", {"key": "k1", "form": FORM, "metadata": {"team": "blue"}})
    assert created.status_code == 201, created.content
    chat = await api.chat("k1", "I live in Paris", idem="t1")
    assert chat.status_code == 200, chat.content
    old = (await api.call("GET", "/sessions/k1")).json()
    assert old["version"] >= 1 and old["turn_count"] == 1
    assert (await api.call("DELETE", "/sessions/k1")).status_code == 204
    return old


async def deleted_at(key: str) -> datetime:
    """The tombstone's deleted_at, to the millisecond the API's times show."""
    row = await AgentSession.objects.aget(key=key)
    assert row.deleted_at is not None
    return row.deleted_at.replace(microsecond=row.deleted_at.microsecond // 1000 * 1000)


def assert_a_new_session(old: dict, new: dict, deleted: datetime) -> None:
    assert datetime.fromisoformat(new["created_at"]) >= deleted > datetime.fromisoformat(old["created_at"])
    assert new["metadata"] == {} and new["fields"] == {} and new["turn_count"] == 0
    assert new["head_turn_id"] is None and new["interrupts"] is None
    assert new["epoch"] == old["epoch"] + 1
    assert new["version"] > old["version"]
    # Kept on purpose: the key's row.
    assert new["id"] == old["id"]


async def test_an_explicit_create_on_a_deleted_key(api):
    old = await an_old_session(api)
    deleted = await deleted_at("k1")
    again = await api.call("POST", "/sessions", {"key": "k1"})
    assert again.status_code == 201, again.content
    new = (await api.call("GET", "/sessions/k1")).json()
    assert_a_new_session(old, new, deleted)
    assert [f["name"] for f in new["form"]] != ["city"]  # the default form, not the old one
    messages = (await api.call("GET", "/sessions/k1/messages")).json()
    assert messages == [], messages
    # An If-Match from before the delete does not match the new session.
    stale = await api.call(
        "PATCH", "/sessions/k1/fields", {"fields": {"name": "Ada"}}, headers={"If-Match": f'"{old["version"]}"'}
    )
    assert stale.status_code == 412, stale.content


async def test_a_chat_on_a_deleted_key(api):
    old = await an_old_session(api)
    deleted = await deleted_at("k1")
    chat = await api.chat("k1", "Hello", idem="t1")  # the old key's Idempotency-Key: no replay
    assert chat.status_code == 200, chat.content
    assert chat.get("Idempotent-Replayed") is None
    new = (await api.call("GET", "/sessions/k1")).json()
    assert datetime.fromisoformat(new["created_at"]) >= deleted > datetime.fromisoformat(old["created_at"])
    assert new["metadata"] == {} and new["turn_count"] == 1
    assert new["epoch"] == old["epoch"] + 1 and new["version"] > old["version"]
    assert new["id"] == old["id"]
    listed = (await api.call("GET", "/sessions")).json()["items"]
    assert [(item["key"], item["created_at"]) for item in listed] == [("k1", new["created_at"])]
