"""A 401 names the scheme that gets in (`WWW-Authenticate: Bearer`) on every
edge — /api/ and /langgraph/, their JSON endpoints (ninja) and their SSE
endpoints (consumers), and /metrics — and an Authorization header that is
there but not `Bearer <key>` is told what to send instead, without the
header's value (it may be a key) coming back."""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator

from agentsite.routing import build_application

pytestmark = pytest.mark.django_db(transaction=True)

STEP = 10
RUN = {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "hi"}]}}

# (method, path, body, how the dialect's body carries the message)
EDGES = {
    "api-json": ("GET", "/api/sessions", None, lambda body: body["error"]["message"]),
    "api-sse": ("POST", "/api/sessions/s1/turns/stream", {"text": "hi"}, lambda body: body["error"]["message"]),
    "protocol-json": ("POST", "/langgraph/threads/search", {}, lambda body: body["detail"]),
    "protocol-sse": ("POST", "/langgraph/runs/stream", RUN, lambda body: body["detail"]),
}


@pytest.fixture(scope="module")
def app():
    return build_application()


async def _request(app, method: str, path: str, headers: dict[str, str], body) -> tuple[int, dict, dict]:
    payload = json.dumps(body).encode() if body is not None else b""
    sent = {"host": "testserver", "content-type": "application/json", **headers}
    comm = HttpCommunicator(app, method, path, payload, headers=[(k.encode(), v.encode()) for k, v in sent.items()])
    response = await comm.get_response(STEP)
    answered = {k.decode().lower(): v.decode() for k, v in response["headers"]}
    # A stream that started is not JSON; only its status matters here.
    told = json.loads(response["body"]) if answered.get("content-type", "").startswith("application/json") else {}
    return response["status"], answered, told


@pytest.mark.parametrize("edge", sorted(EDGES))
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer ask_unknown_0123456789", "Basic dXNlcjpwYXNz", "Bearer"],
    ids=["missing", "unknown key", "another scheme", "no key"],
)
async def test_every_401_carries_www_authenticate(app, edge, authorization):
    method, path, body, _ = EDGES[edge]
    headers = {"authorization": authorization} if authorization is not None else {}
    status, answered, told = await _request(app, method, path, headers, body)
    assert status == 401, told
    assert answered["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("edge", sorted(EDGES))
async def test_a_bare_key_is_told_to_say_bearer(app, alice, edge):
    method, path, body, message_of = EDGES[edge]
    status, answered, told = await _request(app, method, path, {"authorization": alice}, body)
    assert status == 401, told
    message = message_of(told)
    assert "Authorization: Bearer ask_" in message, message
    assert alice not in json.dumps(told)
    assert answered["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("edge", sorted(EDGES))
async def test_another_scheme_is_told_the_one_that_works(app, edge):
    method, path, body, message_of = EDGES[edge]
    status, _, told = await _request(app, method, path, {"authorization": "Token ask_secret_value"}, body)
    assert status == 401, told
    assert "Bearer <key>" in message_of(told)
    assert "secret_value" not in json.dumps(told)


async def test_a_good_key_gets_in_on_every_edge(app, alice):
    for method, path, body, _ in EDGES.values():
        # An empty body for the streams: past the key it is refused (422)
        # before a turn starts, so none runs on after the test.
        sent = {} if path.endswith("/stream") else body
        status, answered, told = await _request(app, method, path, {"authorization": f"Bearer {alice}"}, sent)
        assert status == (422 if path.endswith("/stream") else 200), (path, told)
        assert "www-authenticate" not in answered, path


def test_metrics_401_carries_www_authenticate(client, settings):
    settings.AGENT_METRICS_TOKEN = "metrics-token"
    response = client.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
