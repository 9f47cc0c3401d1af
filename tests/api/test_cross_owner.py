"""A session is visible only to its owner: bob gets the same 404 for alice's
session as for a key nobody uses, on every endpoint, and nothing of alice's
changes. A chat is the exception by design: a chat on a key bob has no
session for creates bob's own session with that key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)


def _alice_state() -> dict[str, Any]:
    return {
        "sessions": list(AgentSession.objects.filter(owner="alice").order_by("key").values()),
        "turns": list(AgentTurn.objects.filter(session__owner="alice").order_by("id").values()),
    }


async def alice_state() -> dict[str, Any]:
    return await orm(_alice_state)


def body(response) -> Any:
    return json.loads(response.content)


@pytest.fixture
async def alice_s1(api, script) -> dict[str, Any]:
    """Alice's `s1` with a committed turn and a field write (version 2), and a
    second session `s2`."""
    assert (await api.chat("s1", "hello")).status_code == 200
    response = await api.call("PATCH", "/sessions/s1/fields", {"fields": {"name": "Ann"}, "expected_version": 1})
    assert response.status_code == 200, response.content
    assert (await api.call("POST", "/sessions", {"key": "s2"})).status_code == 201
    before = await alice_state()
    assert [s["key"] for s in before["sessions"]] == ["s1", "s2"]
    assert len(before["turns"]) == 1
    script.calls.clear()
    return before


NOT_FOUND_ENDPOINTS = {
    "info": ("GET", "/sessions/s1", None),
    "set_fields_body_version": ("PATCH", "/sessions/s1/fields", {"fields": {"name": "Mallory"}, "expected_version": 2}),
    "set_fields_stale_version": (
        "PATCH",
        "/sessions/s1/fields",
        {"fields": {"name": "Mallory"}, "expected_version": 0},
    ),
    "delete": ("DELETE", "/sessions/s1", None),
    "turn_log": ("GET", "/sessions/s1/turns", None),
    "messages": ("GET", "/sessions/s1/messages", None),
}


@pytest.mark.parametrize("endpoint", NOT_FOUND_ENDPOINTS.values(), ids=NOT_FOUND_ENDPOINTS.keys())
async def test_other_owners_session_is_404(api, api_bob, script, alice_s1, endpoint):
    method, path, payload = endpoint
    # Alice herself reaches it (set-fields with a stale version answers 412, not 404)...
    if method == "GET":
        assert (await api.call(method, path)).status_code == 200
    response = await api_bob.call(method, path, payload)
    assert response.status_code == 404, response.content
    error = body(response)["error"]
    assert error["code"] == "session_not_found"
    # ...and bob's answer is exactly the one for a key nobody has.
    unknown = await api_bob.call(method, path.replace("/s1", "/nobody"), payload)
    assert unknown.status_code == 404
    assert body(unknown) == body(response)
    assert await alice_state() == alice_s1
    assert script.count() == 0
    assert await orm(lambda: AgentSession.objects.filter(owner="bob").count()) == 0


async def test_set_fields_with_if_match_on_other_owners_session_is_404(api_bob, alice_s1):
    response = await api_bob.call(
        "PATCH", "/sessions/s1/fields", {"fields": {"name": "Mallory"}}, headers={"If-Match": '"2"'}
    )
    assert response.status_code == 404, response.content
    assert body(response)["error"]["code"] == "session_not_found"
    assert await alice_state() == alice_s1


async def test_other_owner_cannot_see_alices_tombstone_or_turns_after_delete(api, api_bob, alice_s1):
    assert (await api.call("DELETE", "/sessions/s2")).status_code == 204
    before = await alice_state()
    response = await api_bob.call("DELETE", "/sessions/s2")
    assert response.status_code == 404, response.content
    assert body(response)["error"]["code"] == "session_not_found"
    assert await alice_state() == before


async def test_chat_on_other_owners_key_creates_own_session(api, api_bob, script, alice_s1):
    response = await api_bob.chat("s1", "hi, I am Bob")
    assert response.status_code == 200, response.content
    bobs = body(response)
    assert script.count() > 0
    # Alice's session and turns are untouched.
    assert await alice_state() == alice_s1
    # Bob got his own, brand-new session with the same key.
    sessions = await orm(lambda: list(AgentSession.objects.filter(key="s1").order_by("owner").values()))
    assert [s["owner"] for s in sessions] == ["alice", "bob"]
    alice_row, bob_row = sessions
    assert bob_row["id"] != alice_row["id"]
    assert bobs["version"] == 1 and bobs["epoch"] == 1
    # Only what Bob said himself (a volunteered name), nothing of Alice's.
    assert bobs["fields"] == {"name": "Bob"}
    turn = await orm(lambda: AgentTurn.objects.get(pk=bobs["turn_id"]))
    assert turn.session_id == bob_row["id"]
    # Each sees only their own conversation.
    bob_info = body(await api_bob.call("GET", "/sessions/s1"))
    alice_info = body(await api.call("GET", "/sessions/s1"))
    assert bob_info["id"] == str(bob_row["id"]) and bob_info["version"] == 1
    assert alice_info["id"] == str(alice_row["id"]) and alice_info["version"] == 2
    assert alice_info["fields"] == {"name": "Ann"}
    bob_messages = body(await api_bob.call("GET", "/sessions/s1/messages"))
    assert [m["content"] for m in bob_messages if m["role"] == "user"] == ["hi, I am Bob"]
    alice_messages = body(await api.call("GET", "/sessions/s1/messages"))
    assert [m["content"] for m in alice_messages if m["role"] == "user"] == ["hello"]
    bob_turns = body(await api_bob.call("GET", "/sessions/s1/turns"))
    assert [t["id"] for t in bob_turns] == [bobs["turn_id"]]


async def test_chat_with_same_idempotency_key_does_not_replay_other_owners_turn(api, api_bob, script):
    first = await api.chat("s1", "hello", idem="same-key")
    assert first.status_code == 200
    response = await api_bob.chat("s1", "hello", idem="same-key")
    assert response.status_code == 200, response.content
    assert response.get("Idempotent-Replayed") is None
    assert body(response)["turn_id"] != body(first)["turn_id"]
    assert script.count("reply") == 2


async def test_create_same_key_as_other_owner_is_allowed(api_bob, alice_s1):
    response = await api_bob.call("POST", "/sessions", {"key": "s1"})
    assert response.status_code == 201, response.content
    assert body(response)["version"] == 0
    assert await alice_state() == alice_s1


async def test_list_shows_only_own_sessions(api, api_bob, alice_s1):
    assert body(await api_bob.call("GET", "/sessions")) == {"items": [], "count": 0, "limit": 50, "offset": 0}
    assert (await api_bob.call("POST", "/sessions", {"key": "b1"})).status_code == 201
    bobs = body(await api_bob.call("GET", "/sessions"))
    assert bobs["count"] == 1
    assert [s["key"] for s in bobs["items"]] == ["b1"]
    alices = body(await api.call("GET", "/sessions"))
    assert alices["count"] == 2
    assert sorted(s["key"] for s in alices["items"]) == ["s1", "s2"]
