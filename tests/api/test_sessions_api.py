"""Happy paths of the session API: create, info, list, set fields, delete,
chat after delete, transcript, turn log, health and the OpenAPI docs."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import pytest

from sessions_app.models import AgentSession
from tests.fixtures.api import Api
from tests.fixtures.runners import orm

pytestmark = pytest.mark.django_db(transaction=True)

DEFAULT_FIELD_NAMES = ["name", "email", "phone", "preferred_date", "party_size", "topic", "notes"]
INFO_KEYS = {
    "id",
    "key",
    "form",
    "fields",
    "stage",
    "version",
    "epoch",
    "turn_count",
    "created_at",
    "updated_at",
}


def body(response) -> Any:
    return json.loads(response.content)


async def patch(api: Api, key: str, fields: dict, *, version: int | None = None, if_match: str | None = None):
    payload: dict[str, Any] = {"fields": fields}
    if version is not None:
        payload["expected_version"] = version
    headers = {"If-Match": if_match} if if_match is not None else None
    return await api.call("PATCH", f"/sessions/{key}/fields", payload, headers=headers)


# --- create ----------------------------------------------------------------------------------


async def test_create_with_key(api):
    response = await api.call("POST", "/sessions", {"key": "booking-1", "metadata": {"source": "web"}})
    assert response.status_code == 201, response.content
    created = body(response)
    assert created["key"] == "booking-1"
    assert [f["name"] for f in created["form"]] == DEFAULT_FIELD_NAMES
    assert created["fields"] == {}
    assert created["stage"] == "collecting"
    assert (created["version"], created["epoch"], created["turn_count"]) == (0, 1, 0)
    row = await orm(lambda: AgentSession.objects.get(key="booking-1"))
    assert row.owner == "alice"
    assert str(row.id) == created["id"]
    assert row.metadata == {"source": "web"}


async def test_create_without_key_generates_one(api):
    first = await api.call("POST", "/sessions", {})
    second = await api.call("POST", "/sessions", {})
    assert first.status_code == second.status_code == 201, (first.content, second.content)
    keys = [body(first)["key"], body(second)["key"]]
    assert keys[0] != keys[1]
    for key in keys:
        assert re.fullmatch(r"[A-Za-z0-9._:-]{1,255}", key)
        info = await api.call("GET", f"/sessions/{key}")
        assert info.status_code == 200
        assert body(info)["id"] in (body(first)["id"], body(second)["id"])


async def test_create_with_custom_form(api):
    form = [
        {"name": "city", "type": "string", "required": True, "description": "where"},
        {"name": "size", "type": "enum", "enum": ["S", "M", "L"]},
        {"name": "nights", "type": "integer", "required": True},
    ]
    response = await api.call("POST", "/sessions", {"key": "custom", "form": form})
    assert response.status_code == 201, response.content
    created = body(response)
    assert created["form"] == [
        {"name": "city", "type": "string", "required": True, "description": "where"},
        {"name": "size", "type": "enum", "required": False, "description": "", "enum": ["S", "M", "L"]},
        {"name": "nights", "type": "integer", "required": True, "description": ""},
    ]
    assert created["stage"] == "collecting"
    # The custom form is what set-fields validates against.
    response = await patch(api, "custom", {"city": "Oslo", "size": "m", "nights": "3"}, version=0)
    assert response.status_code == 200, response.content
    updated = body(response)
    assert updated["fields"] == {"city": "Oslo", "size": "M", "nights": 3}
    assert updated["stage"] == "complete"
    response = await patch(api, "custom", {"name": "Ann"}, version=1)
    assert response.status_code == 422
    assert body(response)["error"]["code"] == "invalid_fields"


async def test_create_with_form_without_required_fields_is_complete(api):
    response = await api.call("POST", "/sessions", {"key": "opt", "form": [{"name": "note", "type": "string"}]})
    assert response.status_code == 201, response.content
    assert body(response)["stage"] == "complete"


# --- info ------------------------------------------------------------------------------------


async def test_info_fields_and_etag(api, script):
    assert (await api.call("POST", "/sessions", {"key": "s1"})).status_code == 201
    response = await api.call("GET", "/sessions/s1")
    assert response.status_code == 200, response.content
    info = body(response)
    assert set(info) >= INFO_KEYS
    assert response["ETag"] == '"0"'
    assert info["version"] == 0
    created_at = datetime.fromisoformat(info["created_at"])
    updated_at = datetime.fromisoformat(info["updated_at"])
    assert created_at <= updated_at

    chat = body(await api.chat("s1", "my name is Ann Lee"))
    response = await api.call("GET", "/sessions/s1")
    info = body(response)
    assert response["ETag"] == f'"{info["version"]}"' == '"1"'
    assert info["turn_count"] == 1
    assert info["epoch"] == 1
    assert info["fields"] == chat["fields"]
    assert info["stage"] == chat["stage"]
    assert datetime.fromisoformat(info["updated_at"]) > updated_at
    assert datetime.fromisoformat(info["created_at"]) == created_at


async def test_info_unknown_session_is_404(api):
    response = await api.call("GET", "/sessions/nobody")
    assert response.status_code == 404
    assert body(response)["error"]["code"] == "session_not_found"


# --- list ------------------------------------------------------------------------------------


async def test_list_with_limit_offset_and_count(api):
    for key in ["a1", "a2", "a3"]:
        assert (await api.call("POST", "/sessions", {"key": key})).status_code == 201
    first = body(await api.call("GET", "/sessions?limit=2&offset=0"))
    assert (first["count"], first["limit"], first["offset"]) == (3, 2, 0)
    assert len(first["items"]) == 2
    second = body(await api.call("GET", "/sessions?limit=2&offset=2"))
    assert (second["count"], second["limit"], second["offset"]) == (3, 2, 2)
    assert len(second["items"]) == 1
    keys = [s["key"] for s in first["items"] + second["items"]]
    assert sorted(keys) == ["a1", "a2", "a3"]
    # A list leaves the heavy fields out (form, fields, metadata): see the details.
    assert INFO_KEYS - {"form", "fields", "metadata"} == set(first["items"][0])
    past_end = body(await api.call("GET", "/sessions?limit=2&offset=5"))
    assert past_end["items"] == [] and past_end["count"] == 3
    default = body(await api.call("GET", "/sessions"))
    assert (default["count"], default["limit"], default["offset"], len(default["items"])) == (3, 50, 0, 3)


async def test_list_excludes_deleted(api):
    for key in ["a1", "a2"]:
        assert (await api.call("POST", "/sessions", {"key": key})).status_code == 201
    assert (await api.call("DELETE", "/sessions/a1")).status_code == 204
    listed = body(await api.call("GET", "/sessions"))
    assert listed["count"] == 1
    assert [s["key"] for s in listed["items"]] == ["a2"]


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "offset=-1", "limit=x"])
async def test_list_bad_paging_is_422(api, query):
    response = await api.call("GET", f"/sessions?{query}")
    assert response.status_code == 422, response.content
    assert body(response)["error"]["code"] == "validation_error"


# --- set fields --------------------------------------------------------------------------------


async def test_set_fields_with_if_match_then_expected_version(api):
    assert (await api.call("POST", "/sessions", {"key": "s1"})).status_code == 201

    response = await patch(api, "s1", {"name": " Ann Lee ", "party_size": "4"}, if_match='"0"')
    assert response.status_code == 200, response.content
    first = body(response)
    assert response["ETag"] == '"1"'
    assert first["version"] == 1
    assert first["fields"] == {"name": "Ann Lee", "party_size": 4}
    assert first["field_changes"] == {"name": "Ann Lee", "party_size": 4}
    assert first["stage"] == "collecting"
    assert set(first) >= INFO_KEYS

    # Same name again: only what changed is reported; the version still moves.
    response = await patch(api, "s1", {"name": "Ann Lee", "party_size": 5, "email": "Ann@EXAMPLE.com"}, version=1)
    assert response.status_code == 200, response.content
    second = body(response)
    assert second["version"] == 2
    assert second["field_changes"] == {"party_size": 5, "email": "Ann@example.com"}
    assert second["fields"] == {"name": "Ann Lee", "party_size": 5, "email": "Ann@example.com"}
    assert second["stage"] == "collecting"

    # The last required fields flip the stage.
    response = await patch(api, "s1", {"preferred_date": "2025-07-01", "topic": "Booking"}, if_match='W/"2"')
    assert response.status_code == 200, response.content
    third = body(response)
    assert third["version"] == 3
    assert third["stage"] == "complete"
    assert third["fields"] == {
        "name": "Ann Lee",
        "party_size": 5,
        "email": "Ann@example.com",
        "preferred_date": "2025-07-01",
        "topic": "booking",
    }

    info = await api.call("GET", "/sessions/s1")
    assert info["ETag"] == '"3"'
    assert body(info)["fields"] == third["fields"]
    assert body(info)["stage"] == "complete"
    row = await orm(lambda: AgentSession.objects.get(key="s1"))
    assert (row.version, row.stage, row.fields) == (3, "complete", third["fields"])


async def test_set_fields_with_if_match_and_matching_body_version(api):
    assert (await api.call("POST", "/sessions", {"key": "s1"})).status_code == 201
    response = await patch(api, "s1", {"name": "Ann"}, version=0, if_match='"0"')
    assert response.status_code == 200, response.content
    assert body(response)["version"] == 1


async def test_set_fields_on_unknown_session_is_404(api):
    response = await patch(api, "nobody", {"name": "Ann"}, version=0)
    assert response.status_code == 404
    assert body(response)["error"]["code"] == "session_not_found"


async def test_set_fields_moves_the_version_a_chat_continues_from(api, script):
    assert (await api.chat("s1", "hello")).status_code == 200
    response = await patch(api, "s1", {"name": "Ann Lee"}, version=1)
    assert response.status_code == 200, response.content
    # need_form_update=False: the turn proposes no field change of its own.
    chat = body(await api.chat("s1", "thanks", need_form_update=False))
    assert chat["version"] == 3
    assert chat["fields"]["name"] == "Ann Lee"


# --- delete ------------------------------------------------------------------------------------


async def test_delete_then_get_is_404_and_delete_again_is_204(api, script):
    assert (await api.chat("s1", "hello")).status_code == 200
    response = await api.call("DELETE", "/sessions/s1")
    assert response.status_code == 204, response.content
    assert response.content == b""
    for path in ["/sessions/s1", "/sessions/s1/turns", "/sessions/s1/messages"]:
        gone = await api.call("GET", path)
        assert gone.status_code == 404, (path, gone.content)
        assert body(gone)["error"]["code"] == "session_not_found"
    gone = await patch(api, "s1", {"name": "Ann"}, version=1)
    assert gone.status_code == 404
    again = await api.call("DELETE", "/sessions/s1")
    assert again.status_code == 204, again.content
    row = await orm(lambda: AgentSession.objects.get(key="s1"))
    # Deleting twice moves the epoch once; the version is kept.
    assert (row.epoch, row.version, row.fields, row.turn_count) == (2, 1, {}, 0)
    assert row.deleted_at is not None


async def test_delete_unknown_is_404(api):
    response = await api.call("DELETE", "/sessions/nobody")
    assert response.status_code == 404
    assert body(response)["error"]["code"] == "session_not_found"


async def test_create_after_delete_revives_the_key(api):
    assert (await api.call("POST", "/sessions", {"key": "s1"})).status_code == 201
    assert (await patch(api, "s1", {"name": "Ann"}, version=0)).status_code == 200
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    response = await api.call("POST", "/sessions", {"key": "s1"})
    assert response.status_code == 201, response.content
    revived = body(response)
    # The version moves on: an If-Match "1" from before the delete must not match.
    assert (revived["epoch"], revived["version"], revived["fields"]) == (2, 2, {})


async def test_chat_after_delete_starts_epoch_2_and_keeps_the_version(api, script):
    first = body(await api.chat("s1", "hello", idem="k1"))
    second = body(await api.chat("s1", "my name is Ann Lee"))
    assert (first["epoch"], first["version"]) == (1, 1)
    assert (second["epoch"], second["version"]) == (1, 2)
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    calls = script.count()

    # The same Idempotency-Key and text after the delete: a new turn, not a replay.
    response = await api.chat("s1", "hello", idem="k1")
    assert response.status_code == 200, response.content
    assert response.get("Idempotent-Replayed") is None
    third = body(response)
    assert third["turn_id"] not in (first["turn_id"], second["turn_id"])
    # Re-created (version 3, docs/api.md "Sessions"), then the turn's commit.
    assert (third["epoch"], third["version"]) == (2, 4)
    assert "name" not in third["fields"]
    assert script.count() > calls

    info = body(await api.call("GET", "/sessions/s1"))
    assert (info["epoch"], info["version"], info["turn_count"]) == (2, 4, 1)
    turns = body(await api.call("GET", "/sessions/s1/turns"))
    assert [(t["id"], t["epoch"], t["number"]) for t in turns] == [(third["turn_id"], 2, 1)]
    messages = body(await api.call("GET", "/sessions/s1/messages"))
    assert [m["turn_id"] for m in messages] == [third["turn_id"], third["turn_id"]]


# --- transcript and turn log -------------------------------------------------------------------


async def test_messages_in_order(api, script):
    t1 = body(await api.chat("s1", "hello"))
    t2 = body(await api.chat("s1", "my name is Ann Lee"))
    response = await api.call("GET", "/sessions/s1/messages")
    assert response.status_code == 200, response.content
    messages = body(response)
    assert all(set(m) == {"role", "content", "turn_id"} for m in messages), messages
    assert [(m["role"], m["turn_id"]) for m in messages] == [
        ("user", t1["turn_id"]),
        ("assistant", t1["turn_id"]),
        ("user", t2["turn_id"]),
        ("assistant", t2["turn_id"]),
    ]
    assert [m["content"] for m in messages] == ["hello", t1["reply"], "my name is Ann Lee", t2["reply"]]


async def test_messages_of_new_session_are_empty(api):
    assert (await api.call("POST", "/sessions", {"key": "s1"})).status_code == 201
    response = await api.call("GET", "/sessions/s1/messages")
    assert response.status_code == 200
    assert body(response) == []


async def test_turn_log_lists_committed_turns(api, script):
    t1 = body(await api.chat("s1", "hello", idem="first"))
    t2 = body(await api.chat("s1", "my name is Ann Lee", client_mode="form", need_form_update=False))
    response = await api.call("GET", "/sessions/s1/turns")
    assert response.status_code == 200, response.content
    turns = body(response)
    assert [t["id"] for t in turns] == [t1["turn_id"], t2["turn_id"]]
    assert [t["status"] for t in turns] == ["committed", "committed"]
    assert [t["number"] for t in turns] == [1, 2]
    assert [t["epoch"] for t in turns] == [1, 1]
    assert [t["base_version"] for t in turns] == [0, 1]
    assert [t["idempotency_key"] for t in turns] == ["first", None]
    assert turns[0]["request"] == {"text": "hello", "client_mode": "chat", "need_form_update": True}
    assert turns[1]["request"] == {"text": "my name is Ann Lee", "client_mode": "form", "need_form_update": False}
    assert all(t["error"] is None and t["finished_at"] is not None for t in turns)


# --- health and docs ---------------------------------------------------------------------------


async def test_health_without_auth(transactional_db):
    response = await Api(None).call("GET", "/health")
    assert response.status_code == 200, response.content
    assert body(response)["status"] == "ok"


async def test_docs_render(transactional_db):
    response = await Api(None).call("GET", "/docs")
    assert response.status_code == 200, response.content
    assert b"openapi.json" in response.content


async def test_openapi_lists_the_endpoints(transactional_db):
    response = await Api(None).call("GET", "/openapi.json")
    assert response.status_code == 200
    paths = body(response)["paths"]
    expected = {
        "/api/sessions": {"get", "post"},
        "/api/sessions/{key}": {"get", "delete"},
        "/api/sessions/{key}/fields": {"patch"},
        "/api/sessions/{key}/turns": {"get", "post"},
        "/api/sessions/{key}/messages": {"get"},
        "/api/health": {"get"},
    }
    for path, methods in expected.items():
        assert path in paths, sorted(paths)
        assert methods <= set(paths[path]), (path, sorted(paths[path]))
    chat = paths["/api/sessions/{key}/turns"]["post"]
    assert "Idempotency-Key" in [p["name"] for p in chat.get("parameters", [])]
    patch_op = paths["/api/sessions/{key}/fields"]["patch"]
    assert "If-Match" in [p["name"] for p in patch_op.get("parameters", [])]
