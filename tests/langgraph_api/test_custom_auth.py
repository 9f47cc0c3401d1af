"""AGENT_AUTH_PATH (docs/configuration.md, "Custom auth"): an auth.py written
as LangGraph's docs write one (a Bearer token -> a user) decides who calls a
real daphne, on /langgraph/ (JSON endpoints, SSE consumers, the thread
WebSocket, MCP) and /api/,
driven by the LangGraph Python SDK (and MCP's): each user's threads are its own; a
missing or unknown token is a 401, a refusal keeps its status, a handler
that fails is a 401 `auth_failed`, never a 500, and nothing is written."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 90
AUTH_PY = """
from langgraph_sdk import Auth

auth = Auth()

VALID_TOKENS = {
    "user1-token": {"id": "user1", "name": "Alice"},
    "user2-token": {"id": "user2", "name": "Bob"},
}


@auth.authenticate
async def get_current_user(authorization: str | None, path: str, method: str) -> Auth.types.MinimalUserDict:
    assert authorization
    scheme, token = authorization.split()
    assert scheme.lower() == "bearer"
    if token == "banned-token":
        raise Auth.exceptions.HTTPException(status_code=403, detail="banned")
    if token not in VALID_TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    assert path.startswith(("/langgraph/", "/api/")) and method in ("GET", "POST", "WEBSOCKET")
    user = VALID_TOKENS[token]
    return {"identity": user["id"], "display_name": user["name"], "permissions": ["threads:write"]}
"""


def human(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def sessions_of(owner: str) -> list[str]:
    return list(AgentSession.objects.filter(owner=owner).values_list("key", flat=True))


def all_sessions() -> int:
    return AgentSession.objects.count()


async def test_an_auth_py_decides_who_calls(servers, tmp_path):
    auth_file = tmp_path / "auth.py"
    auth_file.write_text(AUTH_PY)
    server = servers(AGENT_AUTH_PATH=f"{auth_file}:auth")
    url = f"{server.url}/langgraph"
    alice = get_client(url=url, headers={"Authorization": "Bearer user1-token"})
    bob = get_client(url=url, headers={"Authorization": "Bearer user2-token"})
    async with asyncio.timeout(TEST_SECONDS), httpx.AsyncClient(base_url=server.url, timeout=30) as raw:
        thread = await alice.threads.create(metadata={"x": "1"})
        tid = thread["thread_id"]
        assert await orm(sessions_of, owner="user1") == [tid]
        values: Any = await alice.runs.wait(tid, "intake", input=human("hello"))
        assert values["messages"][-1]["type"] == "ai"
        # The SSE consumer authenticates by the same handler.
        parts = [p async for p in alice.runs.stream(tid, "intake", input=human("again"), stream_mode="values")]
        assert "values" in [p.event for p in parts]

        # Bob's threads are his: alice's is not found for him, in reads,
        # searches and the run stream alike.
        with pytest.raises(NotFoundError):
            await bob.threads.get(tid)
        assert await bob.threads.search() == []
        assert [t["thread_id"] for t in await alice.threads.search()] == [tid]
        stream = await raw.post(
            f"/langgraph/threads/{tid}/runs/stream",
            json={"assistant_id": "intake", "input": human("mine now")},
            headers={"Authorization": "Bearer user2-token"},
        )
        assert stream.status_code == 404, stream.text
        # The thread WebSocket's handshake: refused (403, before the upgrade)
        # but for the thread's owner.
        socket_url = f"{url.replace('http', 'ws', 1)}/threads/{tid}/stream/events"
        for token in ("", "Bearer user2-token", "Bearer nobody"):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(socket_url, additional_headers={"Authorization": token} if token else {}):
                    pass
            assert refused.value.response.status_code == 403, token
        async with connect(socket_url, additional_headers={"Authorization": "Bearer user1-token"}) as socket:
            await socket.send("not json")
            assert json.loads(await socket.recv())["error"] == "invalid_argument"
        mine = await bob.threads.create()
        assert await orm(sessions_of, owner="user2") == [mine["thread_id"]]

        # /api/ too: the identity is the owner there as well.
        listed = await raw.get("/api/sessions", headers={"Authorization": "Bearer user1-token"})
        assert listed.status_code == 200, listed.text
        assert [s["key"] for s in listed.json()["items"]] == [tid]

        # Refusals: each a JSON error with its code, none a 500, none writes.
        before = await orm(all_sessions)
        cases = [
            ({}, 401, "auth_failed"),  # the handler's `assert authorization` fails
            ({"Authorization": "Basic dXNlcjE="}, 401, "auth_failed"),
            ({"Authorization": "Bearer nobody"}, 401, "unauthorized"),
            ({"Authorization": "Bearer banned-token"}, 403, "forbidden"),
            ({"x-api-key": "user1-token"}, 401, "auth_failed"),  # API keys are not read
        ]
        for headers, status, code in cases:
            made = await raw.post("/langgraph/threads", json={}, headers=headers)
            assert (made.status_code, made.json()["code"]) == (status, code), (headers, made.text)
            streamed = await raw.post(
                "/langgraph/runs/stream", json={"assistant_id": "intake", "input": human("x")}, headers=headers
            )
            assert (streamed.status_code, streamed.json()["code"]) == (status, code), (headers, streamed.text)
            api = await raw.post("/api/sessions", json={}, headers=headers)
            assert (api.status_code, api.json()["error"]["code"]) == (status, code), (headers, api.text)
        assert await orm(all_sessions) == before
        detail = (await raw.get("/langgraph/threads/x", headers={"Authorization": "Bearer nobody"})).json()
        assert detail["detail"] == "Invalid token"
        assert "the AGENT_AUTH_PATH authenticate handler failed" in server.log_text()

        # MCP (docs/agent-protocol.md, "MCP"): the same handler, the same owners.
        async def mcp_call(token: str, arguments: dict) -> Any:
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                streamablehttp_client(f"{url}/mcp", headers=headers) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool("intake", arguments)

        alices = await mcp_call("user1-token", {"messages": "via mcp", "thread_id": tid})
        said = [m["content"] for m in alices.structuredContent["messages"] if m["type"] == "human"]
        assert alices.meta["thread_id"] == tid and said == ["hello", "again", "via mcp"]
        bobs = await mcp_call("user2-token", {"messages": "bob via mcp", "thread_id": tid})
        assert [m["content"] for m in bobs.structuredContent["messages"] if m["type"] == "human"] == ["bob via mcp"]
        before = await orm(all_sessions)
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for headers, status, code in cases:
            answer = await raw.post(
                "/langgraph/mcp", json=listing, headers={**headers, "accept": "application/json, text/event-stream"}
            )
            assert (answer.status_code, answer.json()["error"]["data"]["code"]) == (status, code), answer.text
        assert await orm(all_sessions) == before


async def test_a_bad_auth_path_stops_the_server_at_start(servers):
    with pytest.raises(RuntimeError, match="AGENT_AUTH_PATH='no_such_module:auth' cannot be imported"):
        servers(AGENT_AUTH_PATH="no_such_module:auth")


TEAM_AUTH_PY = """
from langgraph_sdk import Auth

auth = Auth()
USERS = {"user1-token": "user1", "user2-token": "user2", "intern-token": "intern"}


@auth.authenticate
async def get_current_user(authorization: str | None) -> Auth.types.MinimalUserDict:
    scheme, _, token = (authorization or "").partition(" ")
    if token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    # One tenant: every user is owner "acme"; the handlers below keep them apart.
    return {"identity": "acme", "user_id": USERS[token]}


@auth.on.threads.create
async def on_thread_create(ctx: Auth.types.AuthContext, value: Auth.types.on.threads.create.value):
    if ctx.user.user_id == "intern":
        return False
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.user_id
    return {"owner": ctx.user.user_id}


@auth.on.threads.read
@auth.on.threads.search
async def on_thread_read(ctx: Auth.types.AuthContext, value: dict):
    return {"owner": ctx.user.user_id}
"""


async def test_resource_handlers_stamp_and_scope_threads(servers, tmp_path):
    auth_file = tmp_path / "team_auth.py"
    auth_file.write_text(TEAM_AUTH_PY)
    server = servers(AGENT_AUTH_PATH=f"{auth_file}:auth")
    url = f"{server.url}/langgraph"
    one = get_client(url=url, headers={"Authorization": "Bearer user1-token"})
    two = get_client(url=url, headers={"Authorization": "Bearer user2-token"})
    intern = get_client(url=url, headers={"Authorization": "Bearer intern-token"})
    async with asyncio.timeout(TEST_SECONDS):
        # A forged owner in the metadata is overwritten by the handler's stamp.
        made = await one.threads.create(metadata={"owner": "user2", "topic": "a"})
        assert made["metadata"] == {"owner": "user1", "topic": "a"}
        theirs = await two.threads.create()
        assert theirs["metadata"] == {"owner": "user2"}
        # The same owner (acme) in the database; the filters keep them apart.
        assert sorted(await orm(sessions_of, owner="acme")) == sorted([made["thread_id"], theirs["thread_id"]])
        assert (await one.threads.get(made["thread_id"]))["metadata"]["owner"] == "user1"
        with pytest.raises(NotFoundError):
            await two.threads.get(made["thread_id"])
        assert [t["thread_id"] for t in await two.threads.search()] == [theirs["thread_id"]]
        # The client's filter and the handler's both hold (LangGraph's server
        # ANDs them): asking for user2's threads does not widen user1's search.
        assert await one.threads.search(metadata={"owner": "user2"}) == []
        assert await one.threads.count() == 1

        # False from the create handler: 403, nothing written.
        before = await orm(all_sessions)
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await intern.threads.create()
        assert (refused.value.response.status_code, refused.value.response.json()["code"]) == (403, "forbidden")
        assert await orm(all_sessions) == before
