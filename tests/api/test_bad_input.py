"""Bad input is answered with a 4xx and the `{"error": {"code", "message"}}`
envelope, and nothing is written: no session or turn row created or changed,
no version bump, and (for chat) no model call."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from sessions_app.models import AgentSession
from tests.fixtures.api import Api
from tests.fixtures.runners import orm
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

VALID_FIELDS = {"name": "Ann Lee", "email": "ann@example.com"}


# --- helpers -----------------------------------------------------------------------------


def _state() -> dict[str, Any]:
    """Every session and turn row, every column: any write shows up as a diff."""
    return {
        "sessions": list(AgentSession.objects.order_by("owner", "key").values()),
        "turns": list(AgentTurn.objects.order_by("id").values()),
    }


async def state() -> dict[str, Any]:
    return await orm(_state)


class Failures:
    """Collects assertion failures across a loop, so one test reports every
    case that went wrong instead of stopping at the first."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    async def check(self, label: str, coro) -> None:
        try:
            await coro
        except AssertionError as exc:
            self.failures.append(f"{label}: {exc}")

    def __bool__(self) -> bool:
        return bool(self.failures)

    def __str__(self) -> str:
        return "\n".join(self.failures)


def assert_error(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:200])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = json.loads(response.content)
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == code, body
    assert isinstance(error["message"], str) and error["message"], body
    return error


async def _seed(api: Api) -> dict[str, Any]:
    """Alice's session `s1`, one committed chat turn and one field write
    (version 2), so a bad request has real rows it could damage."""
    response = await api.chat("s1", "hello")
    assert response.status_code == 200, response.content
    response = await api.call("PATCH", "/sessions/s1/fields", {"fields": VALID_FIELDS, "expected_version": 1})
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["version"] == 2
    return await state()


@pytest.fixture
async def seeded(api, script) -> dict[str, Any]:
    before = await _seed(api)
    script.calls.clear()
    return before


# --- chat body ---------------------------------------------------------------------------

BAD_CHAT_BODIES = {
    "text_empty": {"text": ""},
    "text_whitespace": {"text": "  \n\t  "},
    "text_too_long": {"text": "x" * 16_001},
    "text_missing": {},
    "text_missing_other_keys": {"client_mode": "chat"},
    "text_number": {"text": 42},
    "text_list": {"text": ["hello"]},
    "text_null": {"text": None},
    "text_object": {"text": {"a": "b"}},
    "unknown_key": {"text": "hello", "temperature": 0.2},
    "client_mode_bad": {"text": "hello", "client_mode": "voice"},
    "client_mode_null": {"text": "hello", "client_mode": None},
    "need_form_update_string": {"text": "hello", "need_form_update": "true"},
    "need_form_update_number": {"text": "hello", "need_form_update": 1},
}


@pytest.mark.parametrize("body", BAD_CHAT_BODIES.values(), ids=BAD_CHAT_BODIES.keys())
async def test_chat_bad_body_is_422_and_writes_nothing(api, script, seeded, body):
    # On alice's session, and on a key a valid chat would create.
    for target in ["s1", "fresh"]:
        response = await api.call("POST", f"/sessions/{target}/turns", body)
        assert_error(response, 422, "validation_error")
        assert script.count() == 0
        assert await state() == seeded


@pytest.mark.parametrize(
    "raw",
    ['{"text": "hello"', "{text: 'hello'}", '{"text": "hello"}}', "not json at all"],
    ids=["truncated", "js_object", "trailing_brace", "plain_text"],
)
async def test_chat_malformed_json_is_400(api, script, seeded, raw):
    for target in ["s1", "fresh"]:
        response = await api.call("POST", f"/sessions/{target}/turns", raw=raw)
        assert_error(response, 400, "malformed_request")
        assert script.count() == 0
        assert await state() == seeded


@pytest.mark.parametrize("raw", ['"hello"', '["hello"]', "42", "null"], ids=["string", "list", "number", "null"])
async def test_chat_json_that_is_not_an_object_is_rejected(api, script, seeded, raw):
    response = await api.call("POST", "/sessions/s1/turns", raw=raw)
    assert response.status_code in (400, 422), response.content
    assert_error(
        response, response.status_code, "malformed_request" if response.status_code == 400 else "validation_error"
    )
    assert script.count() == 0
    assert await state() == seeded


async def test_chat_text_at_the_limit_is_accepted(api, script, seeded):
    """The counterpart of text_too_long: 16000 characters is allowed."""
    response = await api.chat("s1", "x" * 16_000)
    assert response.status_code == 200, response.content
    assert script.count() > 0


# --- Idempotency-Key -----------------------------------------------------------------------

BAD_IDEMPOTENCY_KEYS = {
    "too_long": "k" * 129,
    "empty": "",
    "non_ascii": "clé-1",
    "space": "a b",
    "tab": "a\tb",
}


@pytest.mark.parametrize("idem", BAD_IDEMPOTENCY_KEYS.values(), ids=BAD_IDEMPOTENCY_KEYS.keys())
async def test_chat_bad_idempotency_key_is_422(api, script, seeded, idem):
    for target in ["s1", "fresh"]:
        response = await api.chat(target, "hello", idem=idem)
        assert_error(response, 422, "invalid_idempotency_key")
        assert script.count() == 0
        assert await state() == seeded


async def test_chat_idempotency_key_at_the_limit_is_accepted(api, script, seeded):
    response = await api.chat("s1", "hello again", idem="k" * 128)
    assert response.status_code == 200, response.content
    turn = await orm(lambda: AgentTurn.objects.get(idempotency_key="k" * 128))
    assert str(turn.id) == json.loads(response.content)["turn_id"]


# --- session keys in the URL ---------------------------------------------------------------

BAD_SESSION_KEYS = {
    "too_long": "k" * 256,
    "space": "a b",
    "percent": "a%2Fb",
    "umlaut": "ä",
    "question_mark": "a?b",
    "hash": "a#b",
}

ENDPOINTS = {
    "info": ("GET", "", None),
    "set_fields": ("PATCH", "/fields", {"fields": {"name": "Zed"}, "expected_version": 2}),
    "delete": ("DELETE", "", None),
    "chat": ("POST", "/turns", {"text": "hello"}),
    "turn_log": ("GET", "/turns", None),
    "messages": ("GET", "/messages", None),
}


@pytest.mark.parametrize("key", BAD_SESSION_KEYS.values(), ids=BAD_SESSION_KEYS.keys())
async def test_bad_session_key_in_url_is_422(api, script, seeded, key):
    failures = Failures()
    for name, (method, suffix, body) in ENDPOINTS.items():

        async def check(method=method, suffix=suffix, body=body):
            # Percent-encoded as a client would: every reserved or non-ASCII byte.
            response = await api.call(method, f"/sessions/{quote(key, safe='')}{suffix}", body)
            assert_error(response, 422, "invalid_session_key")
            assert script.count() == 0
            assert await state() == seeded

        await failures.check(f"{method} {name}", check())
    assert not failures, str(failures)


@pytest.mark.parametrize("endpoint", ENDPOINTS.values(), ids=ENDPOINTS.keys())
async def test_session_key_with_encoded_slash_is_rejected(api, script, seeded, endpoint):
    """`a/b` sent as `a%2Fb`: servers decode the path before routing, so this
    reaches no endpoint. Either answer keeps the contract: 422
    invalid_session_key, or a JSON 404 that is not mistaken for a session."""
    method, suffix, body = endpoint
    response = await api.call(method, f"/sessions/{quote('a/b', safe='')}{suffix}", body)
    assert response.status_code in (404, 422), response.content[:200]
    assert_error(response, response.status_code, "invalid_session_key" if response.status_code == 422 else "not_found")
    assert script.count() == 0
    assert await state() == seeded


async def test_session_key_at_the_limit_is_accepted(api, script, seeded):
    key = "k" * 255
    response = await api.chat(key, "hello")
    assert response.status_code == 200, response.content
    info = await api.call("GET", f"/sessions/{key}")
    assert info.status_code == 200, info.content


@pytest.mark.parametrize("key", BAD_SESSION_KEYS.values(), ids=BAD_SESSION_KEYS.keys())
async def test_create_with_bad_session_key_is_422(api, seeded, key):
    response = await api.call("POST", "/sessions", {"key": key})
    assert_error(response, 422, "invalid_session_key")
    assert await state() == seeded


async def test_create_with_empty_session_key_is_422(api, seeded):
    response = await api.call("POST", "/sessions", {"key": ""})
    assert response.status_code == 422, response.content
    assert json.loads(response.content)["error"]["code"] in ("invalid_session_key", "validation_error")
    assert await state() == seeded


# --- create session --------------------------------------------------------------------------

BAD_FORMS = {
    "empty": [],
    "unknown_type": [{"name": "color", "type": "colour"}],
    "bad_name": [{"name": "Full Name", "type": "string"}],
    "missing_type": [{"name": "city"}],
    "enum_without_options": [{"name": "size", "type": "enum"}],
    "enum_on_string": [{"name": "size", "type": "string", "enum": ["S"]}],
    "duplicate_names": [{"name": "city", "type": "string"}, {"name": "city", "type": "date"}],
    "unknown_spec_key": [{"name": "city", "type": "string", "default": "Oslo"}],
    "required_not_bool": [{"name": "city", "type": "string", "required": "yes"}],
    "item_not_object": ["city"],
    "too_many_fields": [{"name": f"f{i}", "type": "string"} for i in range(51)],
}


@pytest.mark.parametrize("form", BAD_FORMS.values(), ids=BAD_FORMS.keys())
async def test_create_with_invalid_form_is_422_invalid_form(api, seeded, form):
    response = await api.call("POST", "/sessions", {"key": "new", "form": form})
    assert_error(response, 422, "invalid_form")
    assert await state() == seeded


BAD_CREATE_BODIES = {
    "form_not_list": {"key": "new", "form": {"name": "city", "type": "string"}},
    "key_number": {"key": 7},
    "metadata_not_object": {"key": "new", "metadata": ["a"]},
    "unknown_key": {"key": "new", "owner": "bob"},
}


@pytest.mark.parametrize("body", BAD_CREATE_BODIES.values(), ids=BAD_CREATE_BODIES.keys())
async def test_create_bad_body_is_422(api, seeded, body):
    response = await api.call("POST", "/sessions", body)
    assert_error(response, 422, "validation_error")
    assert await state() == seeded


async def test_create_malformed_json_is_400(api, seeded):
    response = await api.call("POST", "/sessions", raw='{"key": "new",')
    assert_error(response, 400, "malformed_request")
    assert await state() == seeded


async def test_create_duplicate_key_is_409_and_keeps_the_session(api, seeded):
    response = await api.call(
        "POST", "/sessions", {"key": "s1", "form": [{"name": "city", "type": "string"}], "metadata": {"x": 1}}
    )
    assert_error(response, 409, "session_exists")
    assert await state() == seeded


# --- set fields --------------------------------------------------------------------------------

INVALID_FIELD_VALUES = {
    "unknown_field": {"favourite_colour": "blue"},
    "date_not_real": {"preferred_date": "2025-02-30"},
    "date_format": {"preferred_date": "30/01/2025"},
    "email": {"email": "not-an-email"},
    "enum": {"topic": "weather"},
    "integer_word": {"party_size": "two"},
    "integer_fraction": {"party_size": 2.5},
    "integer_bool": {"party_size": True},
    "string_empty": {"name": "   "},
}


@pytest.mark.parametrize("values", INVALID_FIELD_VALUES.values(), ids=INVALID_FIELD_VALUES.keys())
async def test_set_invalid_field_is_422_invalid_fields(api, seeded, values):
    # A valid value rides along: it must not be applied either.
    body = {"fields": {"notes": "ride along", **values}, "expected_version": 2}
    response = await api.call("PATCH", "/sessions/s1/fields", body)
    error = assert_error(response, 422, "invalid_fields")
    assert [d["field"] for d in error["details"]] == list(values)
    assert await state() == seeded


async def test_set_fields_lists_every_bad_field(api, seeded):
    bad = {
        "nickname": "Al",
        "preferred_date": "2025-13-01",
        "email": "ann@",
        "topic": "weather",
        "party_size": "lots",
    }
    body = {"fields": {"name": "Zed", **bad}, "expected_version": 2}
    response = await api.call("PATCH", "/sessions/s1/fields", body)
    error = assert_error(response, 422, "invalid_fields")
    details = error["details"]
    assert sorted(d["field"] for d in details) == sorted(bad)
    assert all(isinstance(d["message"], str) and d["message"] for d in details)
    assert await state() == seeded


BAD_PATCH_BODIES = {
    "empty_fields": {"fields": {}, "expected_version": 2},
    "fields_missing": {"expected_version": 2},
    "fields_list": {"fields": [["name", "Zed"]], "expected_version": 2},
    "fields_null": {"fields": None, "expected_version": 2},
    "negative_version": {"fields": {"name": "Zed"}, "expected_version": -1},
    "version_string": {"fields": {"name": "Zed"}, "expected_version": "2"},
    "version_float": {"fields": {"name": "Zed"}, "expected_version": 2.5},
    "unknown_key": {"fields": {"name": "Zed"}, "expected_version": 2, "force": True},
}


@pytest.mark.parametrize("body", BAD_PATCH_BODIES.values(), ids=BAD_PATCH_BODIES.keys())
async def test_set_fields_bad_body_is_422(api, seeded, body):
    response = await api.call("PATCH", "/sessions/s1/fields", body)
    assert_error(response, 422, "validation_error")
    assert await state() == seeded


async def test_set_fields_malformed_json_is_400(api, seeded):
    response = await api.call("PATCH", "/sessions/s1/fields", raw='{"fields": {"name": "Zed"}')
    assert_error(response, 400, "malformed_request")
    assert await state() == seeded


@pytest.mark.parametrize(
    "body, headers",
    [
        ({"fields": {"name": "Zed"}, "expected_version": 1}, None),
        ({"fields": {"name": "Zed"}, "expected_version": 0}, None),
        ({"fields": {"name": "Zed"}, "expected_version": 3}, None),
        ({"fields": {"name": "Zed"}}, {"If-Match": '"1"'}),
        ({"fields": {"name": "Zed"}}, {"If-Match": "1"}),
        ({"fields": {"name": "Zed"}}, {"If-Match": 'W/"3"'}),
    ],
    ids=["body_older", "body_zero", "body_newer", "if_match_older", "if_match_bare", "if_match_weak_newer"],
)
async def test_set_fields_stale_version_is_412(api, seeded, body, headers):
    response = await api.call("PATCH", "/sessions/s1/fields", body, headers=headers)
    assert_error(response, 412, "version_conflict")
    assert await state() == seeded
    info = json.loads((await api.call("GET", "/sessions/s1")).content)
    assert info["fields"] == VALID_FIELDS
    assert info["version"] == 2


async def test_set_fields_without_version_is_428(api, seeded):
    response = await api.call("PATCH", "/sessions/s1/fields", {"fields": {"name": "Zed"}})
    assert_error(response, 428, "precondition_required")
    assert await state() == seeded


@pytest.mark.parametrize(
    "if_match",
    ["abc", '"abc"', "-1", '"2", "3"', "*", ""],
    ids=["word", "quoted_word", "negative", "list", "star", "empty"],
)
async def test_set_fields_if_match_not_a_version_is_422(api, seeded, if_match):
    response = await api.call(
        "PATCH", "/sessions/s1/fields", {"fields": {"name": "Zed"}}, headers={"If-Match": if_match}
    )
    assert_error(response, 422, "validation_error")
    assert await state() == seeded


async def test_set_fields_if_match_and_body_disagree_is_422(api, seeded):
    response = await api.call(
        "PATCH", "/sessions/s1/fields", {"fields": {"name": "Zed"}, "expected_version": 2}, headers={"If-Match": '"1"'}
    )
    assert_error(response, 422, "validation_error")
    assert await state() == seeded


async def test_set_fields_with_the_right_version_works(api, seeded):
    """The counterpart of the rejections above: the same write, current version."""
    response = await api.call("PATCH", "/sessions/s1/fields", {"fields": {"name": "Zed"}}, headers={"If-Match": '"2"'})
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["version"] == 3
    assert await state() != seeded


# --- authentication ------------------------------------------------------------------------------

ALL_ENDPOINTS = {
    "create": ("POST", "/sessions", {"key": "new"}),
    "list": ("GET", "/sessions", None),
    **{name: (method, f"/sessions/s1{suffix}", body) for name, (method, suffix, body) in ENDPOINTS.items()},
}

BAD_AUTH = {
    "missing": None,
    "wrong_key": "Bearer ask_00000000_notarealkeyatallnotarealkeyatall0000000",
    "token_scheme": "Token x",
    "bare_key": "x",
    "bearer_empty": "Bearer ",
    "basic": "Basic YWxpY2U6c2VjcmV0",
}


@pytest.mark.parametrize("auth", BAD_AUTH.values(), ids=BAD_AUTH.keys())
async def test_bad_authorization_is_401(api, script, seeded, auth):
    client = Api(None)
    headers = {"Authorization": auth} if auth is not None else None
    failures = Failures()
    for name, (method, path, body) in ALL_ENDPOINTS.items():

        async def check(method=method, path=path, body=body):
            response = await client.call(method, path, body, headers=headers)
            assert_error(response, 401, "unauthorized")
            assert script.count() == 0
            assert await state() == seeded

        await failures.check(name, check())
    assert not failures, str(failures)


async def test_revoked_key_is_401(api, script, seeded):
    from sessions_app.services import api_key_create, api_key_revoke

    row, raw = await orm(api_key_create, owner="alice")
    second = Api(raw)
    # Alice's second key works on her session before it is revoked...
    assert (await second.call("GET", "/sessions/s1")).status_code == 200
    await orm(api_key_revoke, api_key=row)
    failures = Failures()
    for name, (method, path, body) in ALL_ENDPOINTS.items():

        async def check(method=method, path=path, body=body):
            response = await second.call(method, path, body)
            assert_error(response, 401, "unauthorized")
            assert script.count() == 0
            assert await state() == seeded

        await failures.check(name, check())
    assert not failures, str(failures)
    # ...and her first key still does.
    assert (await api.call("GET", "/sessions/s1")).status_code == 200


# --- input the database cannot store -----------------------------------------------------------
# PostgreSQL's jsonb and text reject U+0000. Such input is the client's error
# (a 422 validation_error naming where it was, the same on both databases),
# never a 503 "database unavailable" that tells the client to retry it.

NUL = "a\x00b"


async def test_chat_text_with_nul_is_422(api, script, seeded):
    for target in ["s1", "fresh"]:
        response = await api.chat(target, f"my name is {NUL}")
        assert_error(response, 422, "validation_error")
        assert script.count() == 0
        assert await state() == seeded


@pytest.mark.parametrize("field", ["name", "notes"])
async def test_set_field_with_nul_is_422(api, seeded, field):
    response = await api.call("PATCH", "/sessions/s1/fields", {"fields": {field: NUL}, "expected_version": 2})
    error = assert_error(response, 422, "validation_error")
    assert f"fields.{field}" in error["message"]
    assert await state() == seeded


@pytest.mark.parametrize(
    "form",
    [
        [{"name": "city", "type": "string", "description": NUL}],
        [{"name": "size", "type": "enum", "enum": ["S", NUL]}],
    ],
    ids=["description", "enum_option"],
)
async def test_create_with_nul_in_form_is_422(api, seeded, form):
    response = await api.call("POST", "/sessions", {"key": "new", "form": form})
    error = assert_error(response, 422, "validation_error")
    assert "body.form[0]" in error["message"]
    assert await state() == seeded


@pytest.mark.parametrize("metadata", [{"note": NUL}, {NUL: 1}, {"deep": [{"x": NUL}]}], ids=["value", "key", "nested"])
async def test_create_with_nul_in_metadata_is_422(api, seeded, metadata):
    response = await api.call("POST", "/sessions", {"key": "new", "metadata": metadata})
    assert_error(response, 422, "validation_error")
    assert await state() == seeded


# --- unknown paths -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [("GET", "/nope"), ("GET", "/sessions/s1/nope"), ("POST", "/sessions/s1/fields/x")],
    ids=["root", "under_session", "too_deep"],
)
async def test_unknown_api_path_answers_json_404(api, seeded, method, path):
    """The error contract covers the whole API, not only matched routes."""
    response = await api.call(method, path)
    assert response.status_code == 404, response.content[:200]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    error = json.loads(response.content)["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert await state() == seeded
