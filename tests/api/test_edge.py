"""The ASGI edge (core.http.edge) in front of the whole application,
driven in-process through `build_application()`: body limits before
buffering, the Host check and security headers on the SSE routes, and the
JSON error contract for everything under /api/."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest
from django.conf import settings

from agentsite.routing import build_application
from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def app():
    return build_application()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    # How many request-body chunks the application pulled.
    chunks_read: int = 0
    sent: list = field(default_factory=list)

    @property
    def json(self):
        return json.loads(self.body)


async def call(
    app,
    method: str,
    path: str,
    *,
    headers=None,
    chunks=(),
    host="testserver",
    declared: int | None = None,
    timeout: float = 10,
) -> Answer:
    """One request straight through the ASGI application. `chunks` is the
    body as the server would deliver it; `declared` a Content-Length."""
    sent_headers = [(b"host", host.encode())] if host is not None else []
    for name, value in (headers or {}).items():
        sent_headers.append((name.lower().encode(), value.encode("latin-1")))
    if declared is not None:
        sent_headers.append((b"content-length", str(declared).encode()))
    chunks = list(chunks) or [b""]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "headers": sent_headers,
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    answer = Answer(0, {}, b"")
    gone = asyncio.Event()

    async def receive():
        if answer.chunks_read < len(chunks):
            body = chunks[answer.chunks_read]
            answer.chunks_read += 1
            return {"type": "http.request", "body": body, "more_body": answer.chunks_read < len(chunks)}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        answer.sent.append(message)
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")
            if not message.get("more_body", False):
                gone.set()

    async with asyncio.timeout(timeout):
        await app(scope, receive, send)
    return answer


def assert_contract(answer: Answer, status: int, code: str) -> None:
    assert answer.status == status, (answer.status, answer.body[:300])
    assert answer.headers["content-type"].startswith("application/json"), answer.headers
    body = answer.json
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert body["error"]["message"], body


def assert_protocol_contract(answer: Answer, status: int, code: str) -> None:
    """LangGraph's dialect (/langgraph/, /a2a/): `{"detail", "code"}`."""
    assert answer.status == status, (answer.status, answer.body[:300])
    assert answer.headers["content-type"].startswith("application/json"), answer.headers
    body = answer.json
    assert set(body) == {"detail", "code"} and body["code"] == code, body
    assert body["detail"], body


def assert_refusal(answer: Answer, path: str, status: int, code: str) -> None:
    """The edge's refusal in the contract of the path's dialect; the admin
    and the chat page have none of their own, and get a bare status."""
    if path.startswith("/api/"):
        assert_contract(answer, status, code)
    elif path.startswith(("/langgraph/", "/a2a/")):
        assert_protocol_contract(answer, status, code)
    else:
        assert answer.status == status, (answer.status, answer.body[:300])


def everything():
    return {
        "sessions": list(AgentSession.objects.values()),
        "turns": list(AgentTurn.objects.values()),
    }


# --- item 1: bodies bounded before anything buffers them -----------------------------

ROUTES = [
    ("POST", "/api/sessions"),
    ("POST", "/api/sessions/s1/turns"),
    ("PATCH", "/api/sessions/s1/fields"),
    ("POST", "/api/sessions/s1/turns/stream"),
    ("POST", "/langgraph/threads"),
    ("POST", "/langgraph/threads/t1/runs/stream"),
    ("POST", "/a2a/intake"),
    ("POST", "/admin/login/"),
    ("POST", "/"),
]


@pytest.mark.parametrize("method,path", ROUTES)
async def test_declared_length_over_the_limit_is_413_before_reading(app, settings, alice, method, path):
    settings.AGENT_MAX_BODY_BYTES = 4096
    answer = await call(
        app, method, path, headers={"Authorization": f"Bearer {alice}"}, declared=10**12, chunks=[b"x" * 4096] * 3
    )
    assert_refusal(answer, path, 413, "payload_too_large")
    assert answer.chunks_read == 0, "the body was read"
    assert await orm(everything) == {"sessions": [], "turns": []}


@pytest.mark.parametrize("method,path", ROUTES)
async def test_undeclared_body_is_cut_at_the_limit(app, settings, alice, method, path):
    settings.AGENT_MAX_BODY_BYTES = 4096
    chunks = [b"{" + b" " * 1023] * 100  # 100 KB, no Content-Length (chunked)
    answer = await call(app, method, path, headers={"Authorization": f"Bearer {alice}"}, chunks=chunks)
    assert_refusal(answer, path, 413, "payload_too_large")
    # Read up to the limit, not one chunk more.
    assert answer.chunks_read <= 5, answer.chunks_read
    assert await orm(everything) == {"sessions": [], "turns": []}


async def test_a_body_at_the_limit_is_served(app, settings, alice):
    body = json.dumps({"key": "k1", "metadata": {"pad": "x" * 3000}}).encode()
    settings.AGENT_MAX_BODY_BYTES = len(body)
    answer = await call(
        app,
        "POST",
        "/api/sessions",
        declared=len(body),
        chunks=[body],
        headers={"Authorization": f"Bearer {alice}", "Content-Type": "application/json"},
    )
    assert answer.status == 201, answer.body


# --- item 13: the SSE routes check Host and carry the security headers ---------------


@pytest.mark.parametrize("path", ["/api/sessions/s1/turns/stream", "/api/sessions/s1/turns/x/stream"])
async def test_stream_routes_refuse_a_foreign_host(app, alice, path):
    method = "POST" if path.endswith("turns/stream") else "GET"
    body = json.dumps({"text": "hi"}).encode()
    answer = await call(
        app, method, path, host="evil.example", chunks=[body], headers={"Authorization": f"Bearer {alice}"}
    )
    assert_contract(answer, 400, "disallowed_host")
    assert await orm(everything) == {"sessions": [], "turns": []}


async def test_stream_responses_carry_security_headers(app, alice):
    body = json.dumps({"text": "Ada Lovelace"}).encode()
    answer = await call(
        app, "POST", "/api/sessions/s1/turns/stream", chunks=[body], headers={"Authorization": f"Bearer {alice}"}
    )
    assert answer.status == 200 and b"event: done" in answer.body, answer.body[-300:]
    error = await call(app, "GET", "/api/sessions/s1/turns/x/stream", headers={})
    for got in (answer, error):
        assert got.headers["x-content-type-options"] == "nosniff"
        assert got.headers["x-frame-options"] == "DENY"
        assert got.headers["referrer-policy"] == "same-origin"


# --- item 14: everything under /api/ speaks the JSON error contract -------------------


@pytest.mark.parametrize(
    "method,path,status,code",
    [
        ("POST", "/api/nope", 404, "not_found"),
        ("DELETE", "/api/nope", 404, "not_found"),
        ("PUT", "/api/sessions/s1/nothing/here", 404, "not_found"),
        ("GET", "/api/", 404, "not_found"),
        ("PUT", "/api/sessions", 405, "method_not_allowed"),
        ("OPTIONS", "/api/sessions", 405, "method_not_allowed"),
        ("OPTIONS", "/api/health", 405, "method_not_allowed"),
        ("DELETE", "/api/health", 405, "method_not_allowed"),
        ("POST", "/api/sessions/s1/turns/x/stream", 405, "method_not_allowed"),
    ],
)
async def test_api_errors_are_json(app, alice, method, path, status, code):
    answer = await call(app, method, path, headers={"Authorization": f"Bearer {alice}"})
    assert_contract(answer, status, code)
    assert answer.headers["x-content-type-options"] == "nosniff"
    if status == 405:
        assert answer.headers.get("allow"), answer.headers


async def test_the_api_runs_without_the_admins_middleware_thread_hops(app, alice, monkeypatch):
    """Django runs a sync-style middleware's hooks through `sync_to_async`,
    two thread hops each (docs/scale.md, "CPU"); the API and the protocol's
    JSON endpoints need none of the admin's
    (sessions, users, messages, CSRF, axes) and runs Django's
    SecurityMiddleware on the event loop. The request signals and the
    response's close run there too."""
    import asgiref.sync
    import django.core.handlers.asgi as asgi_handler
    import django.dispatch.dispatcher as dispatcher
    import django.utils.deprecation as deprecation

    hops: list[str] = []
    real = asgiref.sync.sync_to_async  # the function the three modules import

    def counting(fn, *args, **kwargs):
        hops.append(getattr(fn, "__qualname__", repr(fn)))
        return real(fn, *args, **kwargs)

    # Middleware hooks, the request signals' receivers, response.close().
    for module in (deprecation, dispatcher, asgi_handler):
        monkeypatch.setattr(module, "sync_to_async", counting)
    body = json.dumps({"text": "Ada Lovelace"}).encode()
    chat = await call(
        app,
        "POST",
        "/api/sessions/s1/turns",
        chunks=[body],
        headers={"Authorization": f"Bearer {alice}", "content-type": "application/json"},
    )
    assert chat.status == 200, chat.body
    listed = await call(app, "GET", "/api/sessions", headers={"Authorization": f"Bearer {alice}"})
    assert listed.status == 200
    # The protocol's JSON endpoints too: a new thread and a run waited on.
    protocol = {"x-api-key": alice, "content-type": "application/json"}
    thread = await call(app, "POST", "/langgraph/threads", chunks=[b"{}"], headers=protocol)
    assert thread.status == 200, thread.body
    run = {"assistant_id": settings.AGENT_GRAPH, "input": {"messages": [{"role": "user", "content": "Ada Lovelace"}]}}
    waited = await call(
        app,
        "POST",
        f"/langgraph/threads/{thread.json['thread_id']}/runs/wait",
        chunks=[json.dumps(run).encode()],
        headers=protocol,
    )
    assert waited.status == 200, waited.body
    assert hops == []
    # SecurityMiddleware still answers for the API.
    assert chat.headers["cross-origin-opener-policy"] == "same-origin"
    # The counter counts: the admin's pages do go through them.
    page = await call(app, "GET", "/admin/login/")
    assert page.status == 200 and len(hops) >= 10, hops


async def test_the_stream_consumers_make_no_thread_hop_per_message(app, alice, monkeypatch):
    """Channels closes old connections in a worker thread before every
    message a consumer handles; ours hold none (docs/scale.md, "CPU")."""
    import channels.consumer

    hops: list[str] = []

    async def counting():
        hops.append("close_old_connections")

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counting)
    body = json.dumps({"text": "Ada Lovelace"}).encode()
    answer = await call(
        app,
        "POST",
        "/api/sessions/s1/turns/stream",
        chunks=[body[:5], body[5:]],
        headers={"Authorization": f"Bearer {alice}"},
    )
    assert answer.status == 200 and b"event: done" in answer.body, answer.body[-300:]
    assert hops == []


@pytest.mark.parametrize("path", ["/api/health", "/api/sessions", "/api/nope"])
async def test_api_refuses_a_foreign_host_in_json(app, alice, path):
    answer = await call(app, "GET", path, host="evil.example", headers={"Authorization": f"Bearer {alice}"})
    assert_contract(answer, 400, "disallowed_host")


async def test_pages_outside_the_api_keep_django_answers(app):
    answer = await call(app, "GET", "/admin/", host="evil.example")
    assert answer.status == 400
    assert not answer.headers["content-type"].startswith("application/json")


# --- item 11: deep JSON and huge Last-Event-ID on the stream routes ---------------------


@pytest.mark.parametrize("depth", [65, 1_000, 100_000])
async def test_deep_json_on_the_stream_is_400(app, alice, depth):
    body = b'{"text": ' + b"[" * depth + b"]" * depth + b"}"
    answer = await call(
        app, "POST", "/api/sessions/s1/turns/stream", chunks=[body], headers={"Authorization": f"Bearer {alice}"}
    )
    assert_contract(answer, 400, "malformed_request")
    assert await orm(everything) == {"sessions": [], "turns": []}


@pytest.mark.parametrize("digits", [19, 4_300, 5_000])
async def test_huge_last_event_id_is_422(app, api, alice, digits):
    turn = json.loads((await api.chat("s1", "Ada Lovelace")).content)["turn_id"]
    answer = await call(
        app,
        "GET",
        f"/api/sessions/s1/turns/{turn}/stream",
        headers={"Authorization": f"Bearer {alice}", "Last-Event-ID": "9" * digits},
    )
    assert_contract(answer, 422, "validation_error")


# --- item 18: the docs page loads nothing from elsewhere ---------------------------------


def test_docs_use_own_static_files_under_a_csp(client):
    from django.contrib.staticfiles import finders

    response = client.get("/api/docs")
    assert response.status_code == 200
    page = response.content.decode()
    assert "cdn" not in page.lower() and "https://" not in page and "http://" not in page
    for asset in ("ninja/swagger-ui-bundle.js", "ninja/swagger-ui-init.js", "ninja/swagger-ui.css"):
        assert f"/static/{asset}" in page
        assert finders.find(asset), asset
    csp = response["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
