"""Setting fields on a session whose graph fills none (an empty form, as a
booking session gets) refuses every field as unknown: 422 invalid_fields,
nothing written. It answered 500 while the empty form was parsed as a form
to validate against (docs/api.md, "Endpoints")."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def body(response) -> Any:
    return json.loads(response.content)


async def test_set_fields_on_a_booking_session_is_refused_field_by_field(api):
    created = await api.call("POST", "/sessions", {"key": "b1", "graph": "booking"})
    assert created.status_code == 201, created.content
    assert body(created)["form"] == []
    version = body(created)["version"]
    response = await api.call("PATCH", "/sessions/b1/fields", {"fields": {"name": "Ada"}, "expected_version": version})
    assert response.status_code == 422, response.content
    error = body(response)["error"]
    assert error["code"] == "invalid_fields"
    assert error["details"] == [{"field": "name", "message": "unknown field"}]
    after = body(await api.call("GET", "/sessions/b1"))
    assert after["version"] == version
    assert after["fields"] == {}
