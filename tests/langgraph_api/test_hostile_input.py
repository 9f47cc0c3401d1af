"""Hostile input on /langgraph/, through the whole ASGI application (edge,
CORS, consumers, Django): every bad request is a 4xx in the protocol's
`{"detail", "code"}` shape that writes nothing, never a 500 or an input
error reported as a storage outage; filters are bounded before the database
sees them; every path or method /langgraph/ does not serve answers JSON."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from channels.testing import HttpCommunicator

from agentsite.routing import build_application
from langgraph_app.schemas import FILTER_DEPTH_MAX, FILTER_KEYS_MAX
from sessions_app.models import AgentSession
from sessions_app.services import METADATA_MAX_BYTES
from tests.fixtures.runners import orm
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

RUN_ID = "00000000-0000-4000-8000-000000000000"


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"{self.status} {self.headers.get('content-type')} {self.body[:200]!r}"


async def call(method: str, path: str, body: Any = None, *, key: str | None = None, raw: bytes | None = None):
    headers = {"host": "localhost"}
    if key is not None:
        headers["x-api-key"] = key
    content = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    if content:
        headers["content-type"] = "application/json"
    comm = HttpCommunicator(
        build_application(), method, path, content, headers=[(k.encode(), v.encode()) for k, v in headers.items()]
    )
    response = await comm.get_response(timeout=60)
    return Answer(
        response["status"], {k.decode().lower(): v.decode() for k, v in response["headers"]}, response["body"]
    )


def assert_protocol_error(answer: Answer, status: int, code: str | None = None) -> dict[str, Any]:
    assert answer.status == status, answer
    assert answer.headers["content-type"].startswith("application/json"), answer
    body = answer.json()
    assert set(body) >= {"detail", "code"} and isinstance(body["detail"], str), body
    if code is not None:
        assert body["code"] == code, body
    return body


def _rows() -> tuple[int, int]:
    return AgentSession.objects.count(), AgentTurn.objects.count()


async def rows() -> tuple[int, int]:
    return await orm(_rows)


# --- bodies ----------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"[null, null]", b"[]", b'"thread"', b"3", b"null"])
async def test_a_body_that_is_not_an_object_is_refused(alice, raw):
    before = await rows()
    for path in ("/langgraph/threads", "/langgraph/threads/search", "/langgraph/runs/wait", "/langgraph/runs/stream"):
        assert_protocol_error(await call("POST", path, raw=raw, key=alice), 422, "validation_error")
    assert await rows() == before


@pytest.mark.parametrize(
    "path, body",
    [
        ("/langgraph/threads/t1/state/checkpoint", {"checkpoint": [None, None]}),
        ("/langgraph/threads/t1/state/checkpoint", {"checkpoint": "abc"}),
        ("/langgraph/threads/t1/runs/wait", {"assistant_id": "intake", "command": [1]}),
        ("/langgraph/threads/search", {"offset": False}),
        ("/langgraph/threads/search", {"limit": True}),
        ("/langgraph/assistants/search", {"offset": False}),
    ],
)
async def test_a_nested_object_of_the_wrong_type_is_refused(alice, path, body):
    assert (await call("POST", "/langgraph/threads", {"thread_id": "t1"}, key=alice)).status == 200
    before = await rows()
    assert_protocol_error(await call("POST", path, body, key=alice), 422, "validation_error")
    assert await rows() == before


async def test_an_empty_thread_id_is_a_bad_key_not_a_random_one(alice):
    before = await rows()
    assert_protocol_error(await call("POST", "/langgraph/threads", {"thread_id": ""}, key=alice), 422)
    assert await rows() == before


@pytest.mark.parametrize("graph_id", [["intake"], {"name": "intake"}, 3, None])
async def test_any_json_under_metadata_graph_id_is_metadata(alice, graph_id):
    answer = await call("POST", "/langgraph/threads", {"metadata": {"graph_id": graph_id}}, key=alice)
    assert answer.status == 200, answer
    assert answer.json()["metadata"]["graph_id"] == graph_id


async def test_run_metadata_is_bounded_like_thread_metadata(alice):
    before = await rows()
    big = {"note": "x" * METADATA_MAX_BYTES}
    run = {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "hi"}]}, "metadata": big}
    for path in ("/langgraph/runs/wait", "/langgraph/threads/t2/runs", "/langgraph/runs/stream"):
        body = {**run, "if_not_exists": "create"} if "threads" in path else run
        detail = assert_protocol_error(await call("POST", path, body, key=alice), 422, "validation_error")["detail"]
        assert str(METADATA_MAX_BYTES) in detail
    assert_protocol_error(await call("POST", "/langgraph/threads", {"metadata": big}, key=alice), 422)
    assert await rows() == before


# --- metadata filters ----------------------------------------------------------------


FILTERED = ["/langgraph/threads/search", "/langgraph/threads/count", "/langgraph/assistants/search"]


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "metadata",
    [
        {f"k{i}": i for i in range(FILTER_KEYS_MAX + 1)},
        {f"k{i}": i for i in range(30_000)},
        {"deep": _nested(FILTER_DEPTH_MAX)},
        {"big": "x" * METADATA_MAX_BYTES},
    ],
    ids=["keys", "many-keys", "depth", "size"],
)
async def test_a_metadata_filter_past_its_bounds_is_refused_at_once(alice, metadata):
    for path in [*FILTERED, "/langgraph/threads/t1/history"]:
        started = time.monotonic()
        answer = await call("POST", path, {"metadata": metadata}, key=alice)
        assert_protocol_error(answer, 422, "validation_error")
        # Refused by the schema, before any query: the 30,000 keys took minutes.
        assert time.monotonic() - started < 10, path


async def test_a_metadata_filter_within_its_bounds_is_answered(alice):
    match = {f"k{i}": i for i in range(FILTER_KEYS_MAX)}
    created = await call("POST", "/langgraph/threads", {"metadata": {**match, "other": 1}}, key=alice)
    assert created.status == 200, created
    await call("POST", "/langgraph/threads", {"metadata": {"k0": 0}}, key=alice)
    search = await call("POST", "/langgraph/threads/search", {"metadata": match}, key=alice)
    assert search.status == 200, search
    assert [t["thread_id"] for t in search.json()] == [created.json()["thread_id"]]
    count = await call("POST", "/langgraph/threads/count", {"metadata": match}, key=alice)
    assert (count.status, count.json()) == (200, 1)
    deep = {"deep": _nested(FILTER_DEPTH_MAX - 1), "huge": 2**80}
    assert (await call("POST", "/langgraph/threads/count", {"metadata": deep}, key=alice)).json() == 0


# --- query parameters ------------------------------------------------------------------


@pytest.mark.parametrize("xray", ["%C2%B2", "9" * 5000, "17", "-1", "maybe"])
async def test_a_bad_xray_is_refused(alice, xray):
    answer = await call("GET", f"/langgraph/assistants/intake/graph?xray={xray}", key=alice)
    assert_protocol_error(answer, 422, "validation_error")


@pytest.mark.parametrize("xray", ["true", "false", "1", "0", "2", ""])
async def test_a_good_xray_draws_the_graph(alice, xray):
    answer = await call("GET", f"/langgraph/assistants/intake/graph?xray={xray}", key=alice)
    assert answer.status == 200, answer
    assert answer.json()["nodes"]


@pytest.mark.parametrize("mode", ["[" * 3000 + "]" * 3000, "[" * 3000, '["values", 3]', "[nope"])
async def test_a_bad_stream_mode_on_a_join_is_refused(alice, mode):
    assert (await call("POST", "/langgraph/threads", {"thread_id": "t1"}, key=alice)).status == 200
    path = f"/langgraph/threads/t1/runs/{RUN_ID}/stream?stream_mode={mode}"
    assert_protocol_error(await call("GET", path, key=alice), 422, "validation_error")


# --- paths and methods nobody serves ------------------------------------------------------


UNSERVED = [
    ("PUT", "/langgraph/threads"),
    ("DELETE", "/langgraph/threads/search"),
    ("GET", "/langgraph/threads/search"),
    ("PUT", "/langgraph/threads/t1"),
    ("OPTIONS", "/langgraph/threads/t1/history"),
    ("PUT", "/langgraph/assistants/intake"),
    ("PATCH", "/langgraph/threads/t1/runs"),
    ("GET", "/langgraph/threads/t1/runs/stream"),
    ("PUT", "/langgraph/runs/stream"),
    ("DELETE", f"/langgraph/threads/t1/runs/{RUN_ID}/stream"),
    ("POST", "/langgraph/nope"),
    ("POST", "/langgraph/"),
    ("GET", "/langgraph/"),
    ("POST", "/langgraph/docs"),
    ("DELETE", "/langgraph/openapi.json"),
    ("POST", "/langgraph/store/items"),
    ("PATCH", "/langgraph/store/items"),
    ("GET", "/langgraph/store/namespaces"),
    ("POST", "/langgraph/runs/batch"),
    ("POST", "/langgraph/threads/t1/runs/stream/"),
    ("POST", "/langgraph/threads/a/b/runs/stream"),
    ("DELETE", "/langgraph/threads/t1/runs/x/y"),
]


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
async def test_every_unserved_path_or_method_answers_the_json_contract(settings, alice, debug):
    settings.DEBUG = debug
    for method, path in UNSERVED:
        for key in (alice, None):
            answer = await call(method, path, {} if method in ("POST", "PUT", "PATCH") else None, key=key)
            assert answer.status in (404, 405), (method, path, answer)
            body = assert_protocol_error(answer, answer.status)
            assert body["code"] == ("not_found" if answer.status == 404 else "method_not_allowed"), (method, path)


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize("path", ["/langgraph", "/api", "/admin"])
@pytest.mark.parametrize("method", ["GET", "POST", "PATCH", "DELETE", "PUT"])
async def test_a_missing_trailing_slash_redirects_keeping_the_method(settings, debug, path, method):
    settings.DEBUG = debug
    answer = await call(method, path + "?x=1", {} if method != "GET" else None)
    assert answer.status == (301 if method == "GET" else 308), answer
    assert answer.headers["location"] == path + "/?x=1"


# --- where a stateless run lives ----------------------------------------------------------


def _prefixed(location: str) -> str:
    # The headers are relative to the protocol's root, as the SDKs join them.
    return "/langgraph" + location


@pytest.mark.parametrize("path", ["/langgraph/runs/wait", "/langgraph/runs", "/langgraph/runs/stream"])
async def test_a_stateless_run_names_no_url_that_will_not_exist(alice, path):
    run = {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    thrown_away = await call("POST", path, run, key=alice)
    assert thrown_away.status == 200, thrown_away
    assert "location" not in thrown_away.headers and "content-location" not in thrown_away.headers

    kept = await call("POST", path, {**run, "on_completion": "keep"}, key=alice)
    assert kept.status == 200, kept
    content_location = kept.headers["content-location"]
    assert kept.headers["location"].startswith(content_location + "/")
    # The run's URL and the one to join it both answer, once it is over too.
    assert (await call("GET", _prefixed(content_location) + "/join", key=alice)).status == 200
    for url in (content_location, kept.headers["location"]):
        answer = await call("GET", _prefixed(url), key=alice)
        assert answer.status == 200, (url, answer)


# --- cancel, as LangGraph's server answers it -------------------------------------------------


async def test_cancel_answers_what_langgraph_api_answers(alice):
    run = {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    done = await call("POST", "/langgraph/threads/t3/runs/wait", {**run, "if_not_exists": "create"}, key=alice)
    assert done.status == 200, done
    run_id = done.headers["content-location"].rsplit("/", 1)[1]
    before = await rows()
    # A run that already ended is cancelled already: nothing of it changes.
    assert (await call("POST", f"/langgraph/threads/t3/runs/{run_id}/cancel", key=alice)).status == 202
    assert (await call("POST", f"/langgraph/threads/t3/runs/{run_id}/cancel?wait=1", key=alice)).status == 204
    assert await rows() == before
    status = await call("GET", f"/langgraph/threads/t3/runs/{run_id}", key=alice)
    assert status.json()["status"] == "success"
    unknown = await call("POST", f"/langgraph/threads/t3/runs/{RUN_ID}/cancel", key=alice)
    assert_protocol_error(unknown, 404, "turn_not_found")
    not_a_uuid = await call("POST", "/langgraph/threads/t3/runs/nope/cancel", key=alice)
    assert_protocol_error(not_a_uuid, 422, "validation_error")
