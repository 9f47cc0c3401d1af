"""AGENT_PROTOCOL_DEFAULT_KEY (docs/configuration.md, "Environment"): off by
default, a request to /langgraph/ without a key is refused; set, it acts as
that key's owner, on the JSON endpoints and the SSE consumers alike, while a
request that sends a key (good or bad) is judged by its own key. /api/ never
uses it."""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator

from agentsite.routing import build_application

pytestmark = pytest.mark.django_db(transaction=True)


async def call(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict]:
    headers = {"host": "localhost", "content-type": "application/json", **headers}
    comm = HttpCommunicator(
        build_application(), method, path, body, headers=[(k.encode(), v.encode()) for k, v in headers.items()]
    )
    response = await comm.get_response(timeout=10)
    return response["status"], json.loads(response["body"] or b"null")


async def test_without_the_setting_a_keyless_request_is_refused(settings, alice):
    assert settings.AGENT_PROTOCOL_DEFAULT_KEY == ""
    status, body = await call("POST", "/langgraph/threads", {}, b"{}")
    assert (status, body["code"]) == (401, "unauthorized")


async def test_a_keyless_request_acts_as_the_default_keys_owner(settings, alice, bob):
    settings.AGENT_PROTOCOL_DEFAULT_KEY = alice
    status, thread = await call("POST", "/langgraph/threads", {}, json.dumps({"metadata": {"x": "1"}}).encode())
    assert status == 200, thread
    tid = thread["thread_id"]
    status, _ = await call("GET", f"/langgraph/threads/{tid}", {"x-api-key": alice})
    assert status == 200
    # Bob's own key is his, not the default's owner: alice's thread is not his.
    status, _ = await call("GET", f"/langgraph/threads/{tid}", {"x-api-key": bob})
    assert status == 404
    # A key that is sent is judged on its own, never replaced by the default.
    status, body = await call("GET", f"/langgraph/threads/{tid}", {"x-api-key": "wrong"})
    assert (status, body["code"]) == (401, "unauthorized")
    status, body = await call("GET", f"/langgraph/threads/{tid}", {"authorization": "Bearer wrong"})
    assert (status, body["code"]) == (401, "unauthorized")
    # The SSE consumers read the key the same way.
    status, body = await call("GET", f"/langgraph/threads/{tid}/runs/not-a-run/stream", {})
    assert status == 404, body


async def test_the_api_never_uses_it(settings, alice):
    settings.AGENT_PROTOCOL_DEFAULT_KEY = alice
    status, _ = await call("GET", "/api/sessions", {})
    assert status == 401
