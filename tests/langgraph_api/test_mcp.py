"""The Model Context Protocol at /langgraph/mcp (docs/agent-protocol.md,
"MCP"), driven by the official `mcp` SDK's own client (streamablehttp_client
and ClientSession, unmodified) against a real daphne: the assistants listed
as tools, a call that is a run on the protocol's threads, the booking
graph's approval surfacing with its thread and answered through /langgraph/,
one owner's threads kept from another, a retried request id that does not
run twice, and hostile JSON-RPC refused with JSON-RPC errors, nothing
written. One server for the module, on a database of its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from uuid import uuid4

import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

from tests.fixtures.databases import fresh_database, run
from tests.system.server import Server

pytestmark = pytest.mark.system

HELLO = "Hello, my name is Ada Lovelace"
BOOKING_TEXT = "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace"
JSON_AND_SSE = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Served:
    url: str
    alice: str
    bob: str

    @property
    def mcp(self) -> str:
        return f"{self.url}/langgraph/mcp"

    def protocol(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=f"{self.url}/langgraph", headers={"x-api-key": key}, timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("mcp")
    with fresh_database(folder) as (database_url, _):
        done = run(["manage.py", "migrate", "--noinput", "-v", "0"], database_url)
        assert done.returncode == 0, done.stdout + done.stderr
        keys = []
        for owner in ("alice", "bob"):
            done = run(["manage.py", "create_api_key", owner], database_url)
            assert done.returncode == 0, done.stdout + done.stderr
            keys.append(done.stdout.split()[0])
        server = Server(log_path=folder / "server.log", env={"DATABASE_URL": database_url})
        try:
            server.start()
            yield Served(server.url, *keys)
        finally:
            server.stop()


async def session_call(served: Served, key: str, call):
    """`call(session)` in a fresh, initialized client session of `key`'s."""
    async with (
        streamablehttp_client(served.mcp, headers={"x-api-key": key}) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await call(session)


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


async def test_lists_each_assistant_as_a_tool_with_its_input_schema(served):
    listed = await session_call(served, served.alice, lambda s: s.list_tools())
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {"intake", "booking"}
    booking = tools["booking"]
    assert booking.title == "booking"
    assert booking.description
    # The graph's input schema (/assistants/{id}/schemas), messages as one string.
    assert booking.inputSchema["type"] == "object"
    assert booking.inputSchema["required"] == ["messages"]
    assert booking.inputSchema["properties"]["messages"]["type"] == "string"
    assert booking.inputSchema["properties"]["thread_id"]["type"] == "string"
    assert "$defs" not in booking.inputSchema
    with served.protocol(served.alice) as client:
        schemas = client.get("/assistants/intake/schemas").json()["input_schema"]
    assert set(tools["intake"].inputSchema["properties"]) == set(schemas["properties"]) | {"thread_id"}
    assert booking.annotations is not None and booking.annotations.readOnlyHint is False


async def test_a_call_is_a_run_on_a_thread_of_the_protocol(served):
    result = await session_call(served, served.alice, lambda s: s.call_tool("intake", {"messages": HELLO}))
    assert result.isError is False
    assert text_of(result) == "Thanks! What is your email address?"
    assert result.structuredContent is not None
    assert result.structuredContent["fields"] == {"name": "Ada Lovelace"}
    assert result.meta is not None
    thread_id, run_id = result.meta["thread_id"], result.meta["run_id"]
    with served.protocol(served.alice) as client:
        state = client.get(f"/threads/{thread_id}/state").json()
        assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]
        assert [r["run_id"] for r in client.get(f"/threads/{thread_id}/runs").json()] == [run_id]


async def test_a_call_continues_the_thread_it_names(served):
    thread_id = f"mcp-chat-{uuid4()}"

    async def two_turns(session: ClientSession):
        await session.call_tool("intake", {"messages": HELLO, "thread_id": thread_id})
        return await session.call_tool("intake", {"messages": "ada@example.com", "thread_id": thread_id})

    second = await session_call(served, served.alice, two_turns)
    assert second.meta is not None and second.meta["thread_id"] == thread_id
    assert second.structuredContent is not None
    assert [m["type"] for m in second.structuredContent["messages"]] == ["human", "ai", "human", "ai"]
    assert second.structuredContent["fields"]["email"] == "ada@example.com"


async def test_the_booking_approval_surfaces_with_its_thread_and_is_answered_through_langgraph(served):
    result = await session_call(served, served.alice, lambda s: s.call_tool("booking", {"messages": BOOKING_TEXT}))
    assert result.isError is False
    assert result.meta is not None
    thread_id = result.meta["thread_id"]
    text = text_of(result)
    assert text.startswith(f"The run is waiting for approval on thread {thread_id}:")
    assert f"POST /langgraph/threads/{thread_id}/runs/wait" in text
    assert result.structuredContent is not None
    [interrupt] = result.structuredContent["__interrupt__"]
    assert interrupt["value"]["action_requests"][0]["name"] == "book_table"
    with served.protocol(served.alice) as client:
        assert client.get(f"/threads/{thread_id}").json()["status"] == "interrupted"
        answer = client.post(
            f"/threads/{thread_id}/runs/wait",
            json={"assistant_id": "booking", "command": {"resume": {"decisions": [{"type": "approve"}]}}},
        )
        assert answer.status_code == 200, answer.text
        assert "__interrupt__" not in answer.json()
        assert client.get(f"/threads/{thread_id}").json()["status"] == "idle"


async def test_one_owner_never_sees_anothers_threads(served):
    thread_id = f"mcp-shared-name-{uuid4()}"
    alices = await session_call(
        served, served.alice, lambda s: s.call_tool("intake", {"messages": HELLO, "thread_id": thread_id})
    )
    assert alices.meta is not None
    # Bob naming Alice's thread gets a thread of his own by that name.
    bobs = await session_call(
        served, served.bob, lambda s: s.call_tool("intake", {"messages": "Hi, I am Bob Smith", "thread_id": thread_id})
    )
    assert bobs.structuredContent is not None
    assert [m["content"] for m in bobs.structuredContent["messages"] if m["type"] == "human"] == ["Hi, I am Bob Smith"]
    with served.protocol(served.alice) as client:
        state = client.get(f"/threads/{thread_id}/state").json()
        assert [m["content"] for m in state["values"]["messages"] if m["type"] == "human"] == [HELLO]
    # A thread of Alice's own making is not Bob's to read.
    mine = await session_call(served, served.alice, lambda s: s.call_tool("intake", {"messages": HELLO}))
    assert mine.meta is not None
    with served.protocol(served.bob) as client:
        assert client.get(f"/threads/{mine.meta['thread_id']}").status_code == 404


async def test_a_retried_request_id_does_not_run_twice(served):
    text = f"Hello, my name is Retry {uuid4().hex[:6]}"
    # Two client sessions number their requests alike (initialize 0, the
    # call 1): the second call is the first one sent again.
    first = await session_call(served, served.alice, lambda s: s.call_tool("intake", {"messages": text}))
    again = await session_call(served, served.alice, lambda s: s.call_tool("intake", {"messages": text}))
    assert first.meta is not None and again.meta == first.meta
    assert again.structuredContent == first.structuredContent
    # The same id with other arguments is another call.
    other = await session_call(served, served.alice, lambda s: s.call_tool("intake", {"messages": text + "!"}))
    assert other.meta is not None and other.meta["thread_id"] != first.meta["thread_id"]
    with served.protocol(served.alice) as client:
        assert len(client.get(f"/threads/{first.meta['thread_id']}/runs").json()) == 1


async def test_a_retry_sent_while_the_call_runs_joins_it(served):
    message = {
        "jsonrpc": "2.0",
        "id": f"retry-{uuid4()}",
        "method": "tools/call",
        "params": {"name": "intake", "arguments": {"messages": HELLO}},
    }
    headers = {**JSON_AND_SSE, "x-api-key": served.alice}
    async with httpx.AsyncClient(timeout=30) as client:
        answers = await asyncio.gather(*(client.post(served.mcp, json=message, headers=headers) for _ in range(3)))
    results = [a.json()["result"] for a in answers]
    assert all(a.status_code == 200 for a in answers)
    assert all(r["isError"] is False for r in results), results
    assert len({json.dumps(r["_meta"], sort_keys=True) for r in results}) == 1
    with served.protocol(served.alice) as client:
        assert len(client.get(f"/threads/{results[0]['_meta']['thread_id']}/runs").json()) == 1


def thread_count(served: Served) -> int:
    with served.protocol(served.alice) as client:
        return client.post("/threads/count", json={}).json()


HOSTILE: list[tuple[str, bytes, int, int]] = [
    ("not JSON", b'{"jsonrpc": "2.0", "id": 1, "method": ', 400, -32700),
    ("a batch", json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]).encode(), 400, -32600),
    ("an empty batch", b"[]", 400, -32600),
    ("not an object", b"42", 400, -32600),
    ("a null id", b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', 400, -32600),
    ("a boolean id", b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', 400, -32600),
    ("a fractional id", b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', 400, -32600),
    ("NUL in a string", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list\\u0000"}', 422, -32600),
    ("too deep", b'{"a":' * 100 + b"1" + b"}" * 100, 400, -32700),
    ("params a list", b'{"jsonrpc": "2.0", "id": 1, "method": "nothing/here", "params": [1]}', 400, -32602),
    ("no jsonrpc version", b'{"id": 1, "method": "tools/list"}', 400, -32600),
    ("another jsonrpc version", b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', 400, -32600),
    ("a method not a string", b'{"jsonrpc": "2.0", "id": 1, "method": 7}', 400, -32600),
    ("neither request nor response", b'{"jsonrpc": "2.0", "id": 1}', 400, -32602),
    ("a call without params", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}', 200, -32602),
    ("an unknown method", b'{"jsonrpc": "2.0", "id": 1, "method": "threads/delete"}', 200, -32601),
]


@pytest.mark.parametrize("body, status, code", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_json_rpc_is_a_json_rpc_error_and_writes_nothing(served, body, status, code):
    before = thread_count(served)
    answer = httpx.post(served.mcp, content=body, headers={**JSON_AND_SSE, "x-api-key": served.alice}, timeout=30)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code, error
    assert thread_count(served) == before


async def test_bad_tool_calls_are_tool_errors_and_write_nothing(served):
    before = thread_count(served)

    async def calls(session: ClientSession):
        return [
            await session.call_tool("no-such-assistant", {"messages": HELLO}),
            await session.call_tool("intake", {"messages": 42}),
            await session.call_tool("intake", {"messages": HELLO, "thread_id": "../etc"}),
        ]

    unknown, wrong_type, bad_thread = await session_call(served, served.alice, calls)
    assert unknown.isError and unknown.structuredContent == {
        "detail": "Unknown tool: no-such-assistant",
        "code": "assistant_not_found",
    }
    assert wrong_type.isError and text_of(wrong_type).startswith("Input validation error")
    assert bad_thread.isError and bad_thread.structuredContent is not None
    assert bad_thread.structuredContent["code"] == "invalid_session_key"
    assert thread_count(served) == before


def test_the_door_refuses_with_json_rpc_errors(served):
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    nobody = httpx.post(served.mcp, json=listing, headers=JSON_AND_SSE)
    assert nobody.status_code == 401
    assert nobody.headers["www-authenticate"] == "Bearer"
    assert nobody.json()["error"]["code"] == -32001
    assert nobody.json()["error"]["data"]["code"] == "unauthorized"
    wrong = httpx.post(served.mcp, json=listing, headers={**JSON_AND_SSE, "x-api-key": "ask_wrong"})
    assert wrong.status_code == 401
    for method in ("GET", "DELETE", "PUT"):
        refused = httpx.request(method, served.mcp, headers={**JSON_AND_SSE, "x-api-key": served.alice})
        assert refused.status_code == 405 and refused.headers["allow"] == "POST"
        assert refused.json()["error"]["data"]["code"] == "method_not_allowed"
    # Over the server's body limit: refused before a byte is read, as on every route.
    before = thread_count(served)
    huge = {**listing, "params": {"padding": "x" * 2_000_000}}
    too_large = httpx.post(served.mcp, json=huge, headers={**JSON_AND_SSE, "x-api-key": served.alice})
    assert too_large.status_code == 413
    assert thread_count(served) == before
    # What the SDK would refuse before reading the body, refused alike.
    wrong_accept = httpx.post(served.mcp, json=listing, headers={"accept": "text/html", "x-api-key": served.alice})
    assert wrong_accept.status_code == 406
    assert wrong_accept.json()["error"]["data"]["code"] == "malformed_request"
    as_text = httpx.post(
        served.mcp,
        content=json.dumps(listing),
        headers={**JSON_AND_SSE, "content-type": "text/plain", "x-api-key": served.alice},
    )
    assert as_text.status_code == 415
    assert as_text.json()["error"]["data"]["code"] == "malformed_request"


def test_a_client_without_initialize_is_served_statelessly(served):
    answer = httpx.post(
        served.mcp + "/",
        json={"jsonrpc": "2.0", "id": "x", "method": "tools/list"},
        headers={**JSON_AND_SSE, "x-api-key": served.alice},
    )
    assert answer.status_code == 200
    assert {tool["name"] for tool in answer.json()["result"]["tools"]} == {"intake", "booking"}
    assert "mcp-session-id" not in answer.headers
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_info_lists_mcp_beside_a2a(served):
    flags = httpx.get(f"{served.url}/langgraph/info").json()["flags"]
    assert flags["mcp"] is True and flags["a2a"] is True, flags
