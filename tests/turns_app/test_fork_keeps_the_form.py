"""A fork (/api/) or thread copy (/langgraph/) keeps its source's form as
it is, an empty one included: a graph without a `fields` channel gets none
(docs/api.md, "Endpoints"), and copying such a session refused it as an
invalid form (422) until an empty form became valid for such a graph."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def body(response) -> Any:
    return json.loads(response.content)


async def created(api, key: str, **extra) -> dict:
    response = await api.call("POST", "/sessions", {"key": key, **extra})
    assert response.status_code == 201, response.content
    return body(response)


async def form_of(api, key: str) -> list:
    response = await api.call("GET", f"/sessions/{key}")
    assert response.status_code == 200, response.content
    return body(response)["form"]


async def test_a_fork_of_a_booking_session_keeps_its_empty_form(api):
    assert (await created(api, "b1", graph="booking"))["form"] == []
    forked = await api.call("POST", "/sessions/b1/fork", {"turn_id": None, "new_key": "b1-fork"})
    assert forked.status_code == 201, forked.content
    assert await form_of(api, "b1-fork") == []
    assert body(forked)["graph"] == "booking"


async def test_a_copied_booking_thread_keeps_its_empty_form(api):
    await created(api, "b2", graph="booking")
    copied = await api.client.post(
        "/langgraph/threads/b2/copy", data={}, content_type="application/json", headers=api._headers(None)
    )
    assert copied.status_code == 200, copied.content
    assert await form_of(api, body(copied)["thread_id"]) == []


async def test_a_fork_of_a_form_filling_session_keeps_its_form(api):
    form = [{"name": "colour", "type": "string", "required": True}]
    await created(api, "c1", form=form)
    forked = await api.call("POST", "/sessions/c1/fork", {"turn_id": None, "new_key": "c1-fork"})
    assert forked.status_code == 201, forked.content
    assert await form_of(api, "c1-fork") == await form_of(api, "c1")


async def test_an_empty_form_is_valid_only_for_a_graph_that_fills_no_fields(api):
    assert (await created(api, "b3", graph="booking", form=[]))["form"] == []
    refused = await api.call("POST", "/sessions", {"key": "c2", "graph": "intake", "form": []})
    assert refused.status_code == 422 and body(refused)["error"]["code"] == "invalid_form", refused.content
