"""Every JSON answer says `Content-Type: application/json; charset=utf-8`:
ninja's endpoints, the chat endpoint's stored body, /langgraph/'s run
answers, the errors of the consumers, of the ASGI edge, of plain Django
views and of the server guard. The bodies are UTF-8 (`ensure_ascii=False`
writes a name like "Ada Lovelacé" as is), so a client must not have to guess
the charset. Through the whole ASGI application, edge included."""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator

from agentsite.routing import build_application
from core.http.server_guard import raw_error

pytestmark = pytest.mark.django_db(transaction=True)

STEP = 10
JSON_UTF8 = "application/json; charset=utf-8"
RUN = {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "Hello, I am Adá"}]}}


@pytest.fixture(scope="module")
def app():
    return build_application()


async def content_type(app, method: str, path: str, headers: dict[str, str], body=None) -> tuple[int, str]:
    payload = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
    sent = {"host": "testserver", "content-type": "application/json", **headers}
    comm = HttpCommunicator(app, method, path, payload, headers=[(k.encode(), v.encode()) for k, v in sent.items()])
    response = await comm.get_response(STEP)
    found = [v.decode() for k, v in response["headers"] if k.decode().lower() == "content-type"]
    assert len(found) == 1, response["headers"]
    return response["status"], found[0]


async def test_every_json_answer_names_utf_8(app, alice, settings):
    settings.AGENT_METRICS_TOKEN = "metrics-token"
    bearer = {"authorization": f"Bearer {alice}"}
    key = {"x-api-key": alice}
    requests = [
        ("GET", "/api/health", {}, None),
        ("POST", "/api/sessions/c1/turns", bearer, {"text": "Hello, my name is Adá Lovelacé"}),
        # The same again: the stored answer, replayed.
        ("POST", "/api/sessions/c1/turns", {**bearer, "idempotency-key": "k1"}, {"text": "hi"}),
        ("POST", "/api/sessions/c1/turns", {**bearer, "idempotency-key": "k1"}, {"text": "hi"}),
        ("GET", "/api/sessions/c1", bearer, None),
        ("GET", "/api/sessions", bearer, None),
        ("GET", "/api/sessions/nope", bearer, None),  # 404 from an endpoint
        ("GET", "/api/nowhere", bearer, None),  # 404 from the not-found view
        ("POST", "/api/sessions/c1/turns/stream", bearer, {"text": ""}),  # the consumer's 422
        ("POST", "/api/sessions/c1/turns/stream", {}, {"text": "hi"}),  # the consumer's 401
        ("POST", "/api/sessions/c1/turns", bearer, b"x" * (2 * 1024 * 1024)),  # the edge's 413
        ("GET", "/metrics", {"authorization": "Bearer wrong"}, None),  # a plain view's 401
        ("GET", "/langgraph/info", {}, None),
        ("POST", "/langgraph/threads", key, {"thread_id": "c1b"}),
        ("POST", "/langgraph/runs/wait", key, RUN),
        ("POST", "/langgraph/threads/c1b/runs/wait", key, RUN),
        ("POST", "/langgraph/runs/stream", {}, RUN),  # the protocol consumer's 401
    ]
    wrong = []
    for method, path, headers, body in requests:
        status, got = await content_type(app, method, path, headers, body)
        if got.replace(" ", "").lower() != JSON_UTF8.replace(" ", ""):
            wrong.append((method, path, status, got))
    assert wrong == [], "\n".join(map(str, wrong))


def test_the_server_guards_own_answers_name_utf_8():
    head = raw_error(408, "request_timeout", "too slow").split(b"\r\n\r\n", 1)[0].decode()
    assert f"Content-Type: {JSON_UTF8}" in head.split("\r\n")


@pytest.mark.parametrize(
    "path,keys",
    [
        (b"/api/sessions/s1/turns", {"error"}),
        (b"/langgraph/threads?limit=1", {"detail", "code"}),
        (b"/a2a/intake", {"detail", "code"}),
        (b"/admin/login/", {"error"}),
    ],
)
def test_the_server_guards_answers_speak_the_paths_contract(path, keys):
    body = json.loads(raw_error(413, "payload_too_large", "too big", path).split(b"\r\n\r\n", 1)[1])
    assert set(body) == keys, body
