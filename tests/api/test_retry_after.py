"""`Retry-After` where a client should come back: a busy session, the
session quota, storage unavailable — on /api/ and /langgraph/, from their
JSON endpoints (ninja) and their SSE endpoints (consumers) alike, all
rendered by the one front door (core.http.errors)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.testing import HttpCommunicator
from django.db import OperationalError

from agentsite.routing import build_application
from core.errors import SessionBusy, StorageUnavailable, TooManySessions
from langgraph_app import runs as protocol_runs
from turns_app import api as turns_api
from turns_app import consumers as turns_consumers

pytestmark = pytest.mark.django_db(transaction=True)

STEP = 10

# (what the turn's start raises, the status, the code, the Retry-After seconds)
REFUSALS = {
    "session_busy": (SessionBusy(), 409, "session_busy", SessionBusy.retry_after),
    "too_many_sessions": (TooManySessions(), 429, "too_many_sessions", TooManySessions.retry_after),
    "storage_unavailable": (StorageUnavailable(), 503, "storage_unavailable", StorageUnavailable.retry_after),
    # A driver's error, not ours: the front door still says when to retry.
    "database_error": (
        OperationalError("server closed the connection"),
        503,
        "storage_unavailable",
        StorageUnavailable.retry_after,
    ),
}


@pytest.fixture(scope="module")
def app():
    return build_application()


@pytest.fixture(params=sorted(REFUSALS))
def refusal(request, monkeypatch):
    error, status, code, seconds = REFUSALS[request.param]

    async def refuse(**kwargs):
        raise error

    for module in (turns_api, turns_consumers, protocol_runs):
        monkeypatch.setattr(module, "start_turn", refuse)
    return status, code, seconds


async def _request(app, method: str, path: str, headers: dict[str, str], body: dict) -> tuple[int, dict, dict]:
    payload = json.dumps(body).encode()
    sent = {"host": "testserver", "content-type": "application/json", **headers}
    comm = HttpCommunicator(app, method, path, payload, headers=[(k.encode(), v.encode()) for k, v in sent.items()])
    response = await comm.get_response(STEP)
    headers = {k.decode().lower(): v.decode() for k, v in response["headers"]}
    return response["status"], headers, json.loads(response["body"])


def test_every_error_that_says_retry_has_a_whole_number_of_seconds():
    for error, *_ in REFUSALS.values():
        if hasattr(error, "retry_after"):
            assert isinstance(error.retry_after, int) and error.retry_after > 0


@pytest.mark.parametrize("path", ["/api/sessions/s1/turns", "/api/sessions/s1/turns/stream"])
async def test_api_json_and_sse(app, alice, refusal, path):
    status, code, seconds = refusal
    got, headers, body = await _request(app, "POST", path, {"authorization": f"Bearer {alice}"}, {"text": "hi"})
    assert (got, body["error"]["code"]) == (status, code), body
    assert set(body) == {"error"}
    assert headers["retry-after"] == str(seconds)


@pytest.mark.parametrize("path", ["/langgraph/runs/wait", "/langgraph/runs/stream"])
async def test_protocol_json_and_sse(app, alice, refusal, path):
    status, code, seconds = refusal
    run = {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    got, headers, body = await _request(app, "POST", path, {"x-api-key": alice}, run)
    assert (got, body["code"]) == (status, code), body
    assert set(body) == {"detail", "code"}
    assert headers["retry-after"] == str(seconds)


async def test_no_retry_after_where_retrying_does_not_help(app, alice):
    got, headers, body = await _request(app, "POST", "/api/sessions/s1/turns", {"authorization": f"Bearer {alice}"}, {})
    assert got == 422 and "retry-after" not in headers, body
    got, headers, body = await _request(app, "POST", "/langgraph/runs/wait", {"x-api-key": alice}, {})
    assert got == 422 and "retry-after" not in headers, body


async def test_the_session_quota_for_real(app, alice, settings):
    """Not a stand-in: the owner really is at the quota, on every edge."""
    settings.AGENT_MAX_SESSIONS_PER_OWNER = 1
    auth = {"authorization": f"Bearer {alice}"}
    got, _, body = await _request(app, "POST", "/api/sessions", auth, {"key": "k1"})
    assert got in (200, 201), body
    run: dict[str, Any] = {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    for path, headers, body in [
        ("/api/sessions", auth, {"key": "k2"}),
        ("/api/sessions/k2/turns", auth, {"text": "hi"}),
        ("/api/sessions/k2/turns/stream", auth, {"text": "hi"}),
        ("/langgraph/runs/wait", {"x-api-key": alice}, run),
        ("/langgraph/runs/stream", {"x-api-key": alice}, run),
    ]:
        got, answered, told = await _request(app, "POST", path, headers, body)
        assert got == 429, (path, told)
        assert answered["retry-after"] == str(TooManySessions.retry_after), path
