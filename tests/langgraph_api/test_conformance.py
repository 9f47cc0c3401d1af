"""Conformance with the published LangGraph Platform OpenAPI (vendored in
tests/langgraph_api/spec/): for every endpoint /langgraph/ serves, the
spec has the operation, with the same path parameters, and our request
bodies have its property names and enums — except the differences listed
here, which (docs/agent-protocol.md, "Conformance") lists too. A new
difference, or one that went away, fails the test. The shapes of what we
answer are checked against the spec's required properties."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from langgraph_app.api import api as protocol_api
from tests.fixtures.api import Api

SPEC = json.loads((Path(__file__).parent / "spec" / "langgraph-platform-openapi.json").read_text())
PREFIX = "/langgraph"

SERVED = {
    ("get", "/info"),
    ("get", "/ok"),
    ("post", "/assistants"),
    ("patch", "/assistants/{assistant_id}"),
    ("delete", "/assistants/{assistant_id}"),
    ("post", "/assistants/{assistant_id}/versions"),
    ("post", "/assistants/{assistant_id}/latest"),
    ("post", "/assistants/search"),
    ("post", "/assistants/count"),
    ("get", "/assistants/{assistant_id}"),
    ("get", "/assistants/{assistant_id}/graph"),
    ("get", "/assistants/{assistant_id}/schemas"),
    ("get", "/assistants/{assistant_id}/subgraphs"),
    ("post", "/threads"),
    ("post", "/threads/search"),
    ("post", "/threads/count"),
    ("get", "/threads/{thread_id}"),
    ("patch", "/threads/{thread_id}"),
    ("delete", "/threads/{thread_id}"),
    ("post", "/threads/{thread_id}/copy"),
    ("get", "/threads/{thread_id}/state"),
    ("post", "/threads/{thread_id}/state"),
    ("get", "/threads/{thread_id}/state/{checkpoint_id}"),
    ("post", "/threads/{thread_id}/state/checkpoint"),
    ("get", "/threads/{thread_id}/history"),
    ("post", "/threads/{thread_id}/history"),
    ("post", "/threads/{thread_id}/runs"),
    ("get", "/threads/{thread_id}/runs"),
    ("post", "/threads/{thread_id}/runs/stream"),
    ("post", "/threads/{thread_id}/runs/wait"),
    ("get", "/threads/{thread_id}/runs/{run_id}"),
    ("get", "/threads/{thread_id}/runs/{run_id}/join"),
    ("get", "/threads/{thread_id}/runs/{run_id}/stream"),
    ("post", "/threads/{thread_id}/runs/{run_id}/cancel"),
    ("post", "/runs"),
    ("post", "/runs/stream"),
    ("post", "/runs/wait"),
    ("put", "/store/items"),
    ("get", "/store/items"),
    ("delete", "/store/items"),
    ("post", "/store/items/search"),
    ("post", "/store/namespaces"),
    ("post", "/threads/prune"),
    ("get", "/threads/{thread_id}/storage"),
    ("post", "/mcp"),
}
# Served as langgraph-api 0.16.7 serves them, newer than the vendored spec.
NEWER_THAN_SPEC = {("post", "/threads/prune"), ("get", "/threads/{thread_id}/storage")}

# (method, path) -> (request properties the spec has and we lack, ones we add).
KNOWN_BODY_DIFFERENCES: dict[tuple[str, str], tuple[set[str], set[str]]] = {
    # The deprecated checkpoint_id the Python SDK still sends.
    ("post", "/threads/{thread_id}/runs"): (set(), {"checkpoint_id"}),
    ("post", "/threads/{thread_id}/runs/stream"): (set(), {"checkpoint_id"}),
    ("post", "/threads/{thread_id}/runs/wait"): (set(), {"checkpoint_id"}),
    # The Python SDK sends checkpoint_id and the JS SDK `checkpoint`.
    ("post", "/threads/{thread_id}/state"): (set(), {"checkpoint_id"}),
    # `extract` (the Python SDK sends it) is refused.
    ("post", "/threads/{thread_id}/history"): (set(), set()),
    ("post", "/threads/search"): (set(), {"extract"}),
    # The Python SDK's assistants.count sends a name filter.
    ("post", "/assistants/count"): (set(), {"name"}),
    # The spec gives these two no body; the Python SDK sends one.
    ("post", "/assistants/{assistant_id}/versions"): (set(), {"metadata", "limit", "offset"}),
    ("post", "/assistants/{assistant_id}/latest"): (set(), {"version"}),
    # The SDKs send TTLs, index paths and refresh_ttl, which LangGraph's
    # server reads; the vendored spec predates them.
    ("put", "/store/items"): (set(), {"ttl", "index"}),
    ("post", "/store/items/search"): (set(), {"refresh_ttl"}),
    # The spec says any object; ours is a JSON-RPC message.
    ("post", "/mcp"): (set(), {"jsonrpc", "id", "method", "params"}),
}
# Enums we answer more narrowly or widely than the spec: none.
ENUM_PROPERTIES = (
    "stream_mode",
    "multitask_strategy",
    "if_exists",
    "if_not_exists",
    "on_disconnect",
    "on_completion",
    "durability",
    "status",
    "sort_by",
    "sort_order",
    "select",
)


def _resolve(spec: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _body_properties(spec: dict, operation: dict) -> dict:
    body = operation.get("requestBody")
    if not body:
        return {}
    schema = _resolve(spec, body["content"]["application/json"]["schema"])
    return {name: _resolve(spec, prop) for name, prop in schema.get("properties", {}).items()}


def _enum(spec: dict, prop: dict) -> set | None:
    found = set()
    stack = [prop]
    while stack:
        item = _resolve(spec, stack.pop())
        found |= set(item.get("enum") or ())
        stack += (
            item.get("anyOf", [])
            + item.get("oneOf", [])
            + ([item["items"]] if isinstance(item.get("items"), dict) else [])
        )
    return found or None


def _spec_path(path: str) -> dict:
    """The spec's operations of `path`, which it may spell with a trailing
    slash (`/mcp/`)."""
    return SPEC["paths"].get(path) or SPEC["paths"].get(path + "/", {})


def _path_params(operation: dict) -> set:
    return {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}


@pytest.fixture(scope="module")
def ours() -> dict:
    return protocol_api.get_openapi_schema()


def _our_operations(ours: dict) -> dict:
    out = {}
    for path, methods in ours["paths"].items():
        for method, operation in methods.items():
            out[(method, path.removeprefix(PREFIX).rstrip("/") or "/")] = operation
    return out


def test_we_serve_the_listed_endpoints_and_the_spec_has_each(ours):
    operations = _our_operations(ours)
    assert set(operations) == SERVED
    missing = [(m, p) for m, p in SERVED if m not in _spec_path(p)]
    assert set(missing) == NEWER_THAN_SPEC


def test_path_parameters_match(ours):
    operations = _our_operations(ours)
    for (method, path), operation in operations.items():
        if (method, path) in NEWER_THAN_SPEC:
            assert _path_params(operation) == set(re.findall(r"{(\w+)}", path))
            continue
        assert _path_params(operation) == _path_params(_spec_path(path)[method]) == set(re.findall(r"{(\w+)}", path))


def test_request_bodies_have_the_specs_properties_and_enums(ours):
    operations = _our_operations(ours)
    differences = {}
    for key, operation in operations.items():
        method, path = key
        if key in NEWER_THAN_SPEC:
            continue
        theirs = _body_properties(SPEC, _spec_path(path)[method])
        mine = _body_properties(ours, operation)
        lacking, added = set(theirs) - set(mine), set(mine) - set(theirs)
        if lacking or added:
            differences[key] = (lacking, added)
        for name in set(theirs) & set(mine):
            if name in ENUM_PROPERTIES:
                assert _enum(ours, mine[name]) == _enum(SPEC, theirs[name]), (key, name)
    assert differences == {k: v for k, v in KNOWN_BODY_DIFFERENCES.items() if v != (set(), set())}


REQUIRED = {
    name: set(SPEC["components"]["schemas"][name]["required"]) for name in ("Thread", "ThreadState", "Run", "Assistant")
}


@pytest.mark.django_db(transaction=True)
async def test_what_we_answer_has_the_specs_required_properties(alice):
    client = Api(None).client
    headers = {"x-api-key": alice}

    async def call(method: str, path: str, body=None):
        response = await getattr(client, method)(
            f"{PREFIX}{path}", data=body, content_type="application/json", headers=headers
        )
        assert response.status_code == 200, response.content
        return json.loads(response.content)

    assistant = await call("get", "/assistants/intake")
    thread = await call("post", "/threads", {"metadata": {"k": "v"}})
    await call(
        "post",
        f"/threads/{thread['thread_id']}/runs/wait",
        {"assistant_id": "intake", "input": {"messages": [{"role": "user", "content": "Hello"}]}},
    )
    state = await call("get", f"/threads/{thread['thread_id']}/state")
    [run] = await call("get", f"/threads/{thread['thread_id']}/runs")
    assert REQUIRED["Assistant"] <= set(assistant)
    assert REQUIRED["Thread"] <= set(thread)
    assert REQUIRED["ThreadState"] <= set(state)
    assert REQUIRED["Run"] <= set(run)
    assert run["status"] in _enum(SPEC, SPEC["components"]["schemas"]["Run"]["properties"]["status"])
    assert thread["status"] in _enum(SPEC, SPEC["components"]["schemas"]["Thread"]["properties"]["status"])
