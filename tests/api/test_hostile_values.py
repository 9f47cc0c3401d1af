"""Values that PostgreSQL refuses (and SQLite silently stores) answer 422
`validation_error` at the door on both databases, and write nothing: huge
offsets, non-finite numbers, lone surrogates; bodies over the limit on every
JSON endpoint; `.` and `..` as keys (docs/api.md, "Limits and hostile clients")."""

from __future__ import annotations

import json

import pytest

from tests.api.test_bad_input import assert_error, state

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def seeded(api, script):
    response = await api.chat("s1", "hello")
    assert response.status_code == 200, response.content
    script.calls.clear()
    return await state()


@pytest.mark.parametrize("offset", [2**63, 2**63 - 1, 2**64, 10**30, 2**31])
async def test_huge_offsets_are_422(api, seeded, offset):
    response = await api.call("GET", f"/sessions?offset={offset}")
    assert_error(response, 422, "validation_error")
    assert await state() == seeded


async def test_a_large_but_sane_offset_is_an_empty_page(api, seeded):
    response = await api.call("GET", f"/sessions?offset={2**31 - 1}")
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["items"] == []


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]


@pytest.mark.parametrize("number", NON_FINITE)
async def test_non_finite_numbers_are_422_and_write_nothing(api, script, seeded, number):
    bodies = [
        ("POST", "/sessions", f'{{"key": "fresh", "metadata": {{"x": {number}}}}}'),
        ("POST", "/sessions", f'{{"key": "s1", "metadata": {{"x": [1, {number}]}}}}'),
        ("PATCH", "/sessions/s1/fields", f'{{"fields": {{"party_size": {number}}}, "expected_version": 1}}'),
        ("POST", "/sessions/s1/turns", f'{{"text": "hi", "x": {number}}}'),
    ]
    for method, path, raw in bodies:
        response = await api.call(method, path, raw=raw)
        assert_error(response, 422, "validation_error")
        assert script.count() == 0
        assert await state() == seeded


SURROGATES = {
    "metadata_value": ("POST", "/sessions", '{"key": "fresh", "metadata": {"a": "x\\ud800y"}}'),
    "metadata_key": ("POST", "/sessions", '{"key": "fresh", "metadata": {"\\udc00": 1}}'),
    "enum_option": (
        "POST",
        "/sessions",
        '{"key": "fresh", "form": [{"name": "t", "type": "enum", "enum": ["a\\udc00b"]}]}',
    ),
    "description": (
        "POST",
        "/sessions",
        '{"key": "fresh", "form": [{"name": "t", "type": "string", "description": "\\ud83d"}]}',
    ),
    "field_value": ("PATCH", "/sessions/s1/fields", '{"fields": {"name": "a\\udc00b"}, "expected_version": 1}'),
    "field_name": ("PATCH", "/sessions/s1/fields", '{"fields": {"\\udc00": "x"}, "expected_version": 1}'),
    "chat_text": ("POST", "/sessions/s1/turns", '{"text": "a\\udc00b"}'),
    "chat_text_new_key": ("POST", "/sessions/fresh/turns", '{"text": "\\ud800"}'),
}


@pytest.mark.parametrize("case", SURROGATES.values(), ids=SURROGATES.keys())
async def test_lone_surrogates_are_422_and_write_nothing(api, script, seeded, case):
    method, path, raw = case
    response = await api.call(method, path, raw=raw)
    assert_error(response, 422, "validation_error")
    assert script.count() == 0
    assert await state() == seeded


def test_a_model_value_with_a_lone_surrogate_is_rejected():
    """Field values a model proposes pass the same check as a client's
    (`coerce_value` validates both), so none reaches the database."""
    from graphs.intake.form_spec import FieldValueError, coerce_value, parse_form

    (spec,) = parse_form([{"name": "name", "type": "string"}])
    with pytest.raises(FieldValueError, match="lone surrogates"):
        coerce_value(spec, "a\udc00b")
    assert coerce_value(spec, "Zoë 🙂") == "Zoë 🙂"


# --- item 8: 413 on every JSON endpoint ------------------------------------------------


@pytest.mark.parametrize(
    "method,path",
    [
        ("POST", "/sessions"),
        ("POST", "/sessions/s1/turns"),
        ("PATCH", "/sessions/s1/fields"),
        ("POST", "/sessions/fresh/turns"),
    ],
)
async def test_bodies_over_the_limit_are_413_on_json_endpoints(api, script, seeded, settings, method, path):
    """Through Django's own handler (no edge in front): Django raises
    RequestDataTooBig when the view reads the body."""
    raw = json.dumps({"text": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10)})
    response = await api.call(method, path, raw=raw)
    assert_error(response, 413, "payload_too_large")
    assert script.count() == 0
    assert await state() == seeded


# --- item 15: keys browsers cannot address -------------------------------------------


@pytest.mark.parametrize("key", [".", ".."])
async def test_dot_keys_are_refused(api, script, seeded, key):
    response = await api.call("POST", "/sessions", {"key": key})
    assert_error(response, 422, "invalid_session_key")
    assert await state() == seeded


async def test_keys_with_dots_inside_are_fine(api):
    for key in ("a.b", "...x", "v1.2.3", ".hidden"):
        response = await api.call("POST", "/sessions", {"key": key})
        assert response.status_code == 201, (key, response.content)
