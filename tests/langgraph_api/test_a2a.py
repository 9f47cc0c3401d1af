"""Agent2Agent (A2A) with a2a-sdk's own client, unmodified, against a real
daphne on the suite's database (docs/agent-protocol.md, "A2A"): the agent
card, message/send and tasks/get, message/stream, an input-required task
answered once, cancel, two owners kept apart, hostile JSON-RPC — and, on
PostgreSQL, a stream taken up again on another process."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import A2AError

from tests.fixtures.databases import fresh_database, run
from tests.system.server import Server

pytestmark = pytest.mark.system

GRAPHS = "intake=graphs.intake.graph:build_intake_graph,booking=graphs.booking.graph:build_booking_graph"
BOOKING_TEXT = "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace"
TEST_SECONDS = 60
# Small, so an oversized body fits in the socket buffers the server refuses it from.
BODY_LIMIT = 65_536
# Slow enough that a stream dropped after two tokens is subscribed to again while the run still runs.
TOKEN_DELAY_MS = "60"


@dataclass
class Served:
    server: Server
    keys: dict[str, str]
    database_url: str
    folder: Path

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("a2a")
    with fresh_database(folder) as (database_url, _):
        done = run(["manage.py", "migrate", "--noinput", "-v", "0"], database_url)
        assert done.returncode == 0, done.stdout + done.stderr
        keys = {}
        for owner in ("alice", "bob"):
            done = run(["manage.py", "create_api_key", owner], database_url)
            assert done.returncode == 0, done.stdout + done.stderr
            keys[owner] = done.stdout.split()[0]
        env = {
            "DATABASE_URL": database_url,
            "AGENT_GRAPHS": GRAPHS,
            "AGENT_OFFLINE_TOKEN_DELAY_MS": TOKEN_DELAY_MS,
            "AGENT_MAX_BODY_BYTES": str(BODY_LIMIT),
        }
        server = Server(log_path=folder / "server.log", env=env)
        try:
            server.start()
            yield Served(server, keys, database_url, folder)
        finally:
            server.stop()


async def client_for(url: str, key: str, assistant: str = "intake", *, streaming: bool = False):
    http = httpx.AsyncClient(headers={"x-api-key": key}, timeout=30)
    config = ClientConfig(httpx_client=http, streaming=streaming)
    return await create_client(f"{url}/a2a/{assistant}", client_config=config)


def user_message(text: str | None = None, *, data=None, task_id: str = "", context_id: str = "", message_id=None):
    message = Message(
        role=Role.ROLE_USER, message_id=message_id or str(uuid.uuid4()), task_id=task_id, context_id=context_id
    )
    if text is not None:
        message.parts.append(Part(text=text))
    if data is not None:
        message.parts.add().data.struct_value.update(data)
    return message


async def send(client, message: Message, **configuration):
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(**configuration))
    return [event async for event in client.send_message(request)]


async def send_task(client, message: Message, **configuration):
    (event,) = await send(client, message, **configuration)
    assert event.HasField("task"), event
    return event.task


def texts(message) -> str:
    return "".join(part.text for part in message.parts)


async def rpc(url: str, key: str, body, *, assistant: str = "intake", raw: bytes | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        content = raw if raw is not None else json.dumps(body).encode()
        return await http.post(
            f"{url}/a2a/{assistant}",
            content=content,
            headers={"x-api-key": key, "content-type": "application/json", "A2A-Version": "1.0"},
        )


async def thread_count(url: str, key: str) -> int:
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(f"{url}/langgraph/threads/count", json={}, headers={"x-api-key": key})
        assert answer.status_code == 200, answer.text
        return answer.json()


async def test_the_card_names_the_assistant_its_skill_and_the_json_rpc_endpoint(served):
    async with httpx.AsyncClient(timeout=30) as http:
        headers = {"x-api-key": served.keys["alice"]}
        card = (await http.get(f"{served.url}/a2a/booking/.well-known/agent-card.json", headers=headers)).json()
        assert card["name"] == "booking"
        assert card["supportedInterfaces"] == [
            {"url": f"{served.url}/a2a/booking", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]
        assert card["capabilities"]["streaming"] is True
        (skill,) = card["skills"]
        assert "restaurant tables" in skill["description"] and "input:messages" in skill["tags"]
        # The domain's card is AGENT_GRAPH's (the first registered), or ?assistant_id's.
        root = (await http.get(f"{served.url}/.well-known/agent-card.json", headers=headers)).json()
        assert root["name"] == "intake"
        named = await http.get(f"{served.url}/.well-known/agent-card.json?assistant_id=booking", headers=headers)
        assert named.json() == card
        # As /langgraph/: no key, no card; an unknown assistant is a 404.
        refused = await http.get(f"{served.url}/a2a/booking/.well-known/agent-card.json")
        assert refused.status_code == 401 and refused.json()["code"] == "unauthorized", refused.text
        missing = await http.get(f"{served.url}/a2a/nope/.well-known/agent-card.json", headers=headers)
        assert missing.status_code == 404 and missing.json()["code"] == "assistant_not_found", missing.text


async def test_send_then_get_the_task_a_run_on_the_context_thread(served):
    client = await client_for(served.url, served.keys["alice"])
    async with asyncio.timeout(TEST_SECONDS):
        task = await send_task(client, user_message("Hello, my name is Ada Lovelace"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        context_id, run_id = task.id.rsplit(":", 1)
        assert task.context_id == context_id
        (artifact,) = task.artifacts
        reply = texts(artifact)
        assert "email" in reply.lower(), reply
        assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]
        assert texts(task.history[0]) == "Hello, my name is Ada Lovelace"
        # The task is the run, on the thread named by the context, for /langgraph/ too.
        async with httpx.AsyncClient(timeout=30) as http:
            headers = {"x-api-key": served.keys["alice"]}
            got = await http.get(f"{served.url}/langgraph/threads/{context_id}/runs/{run_id}", headers=headers)
            assert got.json()["status"] == "success", got.text
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        assert fetched == task
        # A second message on the context continues the thread: a new task.
        second = await send_task(client, user_message("ada@example.com", context_id=context_id))
        assert second.context_id == context_id and second.id != task.id
        assert second.status.state == TaskState.TASK_STATE_COMPLETED
        shorter = await client.get_task(GetTaskRequest(id=second.id, history_length=1))
        assert [m.role for m in shorter.history] == [Role.ROLE_AGENT]


async def test_a2a_0_3_method_names_work_too(served):
    """message/send and tasks/get as A2A 0.3 clients (and langgraph-api's docs) name them."""
    headers = {"x-api-key": served.keys["alice"]}
    message = {"role": "user", "parts": [{"kind": "text", "text": "Hello, my name is Ada"}], "messageId": "v03-1"}
    async with httpx.AsyncClient(timeout=30) as http:
        url = f"{served.url}/a2a/intake"
        sent = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}},
            headers=headers,
        )
        task = sent.json()["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed", sent.text
        got = await http.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}}, headers=headers
        )
        assert got.json()["result"]["id"] == task["id"], got.text


async def test_a_retried_message_id_does_not_run_twice(served):
    client = await client_for(served.url, served.keys["alice"])
    async with asyncio.timeout(TEST_SECONDS):
        before = await thread_count(served.url, served.keys["alice"])
        message = user_message("Hello, my name is Grace Hopper")
        first = await send_task(client, message)
        again = await send_task(client, message)
        assert again == first
        assert await thread_count(served.url, served.keys["alice"]) == before + 1
        async with httpx.AsyncClient(timeout=30) as http:
            headers = {"x-api-key": served.keys["alice"]}
            listed = await http.get(f"{served.url}/langgraph/threads/{first.context_id}/runs", headers=headers)
            assert len(listed.json()) == 1, listed.text


async def test_input_required_is_answered_once(served):
    client = await client_for(served.url, served.keys["alice"], "booking")
    async with asyncio.timeout(TEST_SECONDS):
        task = await send_task(client, user_message(BOOKING_TEXT))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
        assert "Book a table for 2" in texts(task.status.message)
        answer = user_message(data={"resume": {"decisions": [{"type": "approve"}]}}, task_id=task.id)
        done = await send_task(client, answer)
        assert done.id == task.id and done.status.state == TaskState.TASK_STATE_COMPLETED, done
        assert "BK-" in texts(done.artifacts[-1]), done.artifacts
        # The same answer again (its messageId) replays; another is refused.
        assert await send_task(client, answer) == done
        with pytest.raises(A2AError, match="not waiting for input"):
            await send(client, user_message(data={"resume": {"decisions": [{"type": "approve"}]}}, task_id=task.id))
        async with httpx.AsyncClient(timeout=30) as http:
            headers = {"x-api-key": served.keys["alice"]}
            listed = await http.get(f"{served.url}/langgraph/threads/{task.context_id}/runs", headers=headers)
            assert [r["status"] for r in listed.json()] == ["success", "success"], listed.text


async def test_message_stream_sends_the_reply_token_by_token(served):
    client = await client_for(served.url, served.keys["alice"], streaming=True)
    async with asyncio.timeout(TEST_SECONDS):
        events = await send(client, user_message("Hello, my name is Ada Lovelace"))
        assert events[0].HasField("task") and events[0].task.status.state == TaskState.TASK_STATE_WORKING
        pieces = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert len(pieces) > 3
        assert not pieces[0].append and all(p.append for p in pieces[1:])
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        task = await client.get_task(GetTaskRequest(id=events[0].task.id))
        assert "".join(texts(p.artifact) for p in pieces) == texts(task.artifacts[0])
        assert {p.artifact.artifact_id for p in pieces} == {task.artifacts[0].artifact_id}


async def test_cancel_a_working_task(served):
    client = await client_for(served.url, served.keys["alice"])
    async with asyncio.timeout(TEST_SECONDS):
        task = await send_task(client, user_message("Hello, my name is Ada Lovelace"), return_immediately=True)
        assert task.status.state == TaskState.TASK_STATE_WORKING
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
        assert (await client.get_task(GetTaskRequest(id=task.id))).status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(A2AError, match="ended"):
            await client.cancel_task(CancelTaskRequest(id=task.id))


async def test_two_owners_are_kept_apart(served):
    alice = await client_for(served.url, served.keys["alice"])
    bob = await client_for(served.url, served.keys["bob"])
    async with asyncio.timeout(TEST_SECONDS):
        task = await send_task(alice, user_message("Hello, my name is Ada Lovelace"))
        for call in (
            bob.get_task(GetTaskRequest(id=task.id)),
            bob.cancel_task(CancelTaskRequest(id=task.id)),
            send(bob, user_message("hi", task_id=task.id)),
        ):
            with pytest.raises(A2AError, match="not found"):
                await call
        # Another agent (assistant) of the same owner does not know the task either.
        with pytest.raises(A2AError, match="not found"):
            await (await client_for(served.url, served.keys["alice"], "booking")).get_task(GetTaskRequest(id=task.id))
        # Bob's message on Alice's context id is his own thread of that id.
        bobs = await send_task(bob, user_message("Hello, my name is Bob", context_id=task.context_id))
        assert bobs.context_id == task.context_id and bobs.id != task.id
        assert len((await alice.get_task(GetTaskRequest(id=task.id))).history) == 2


@pytest.mark.parametrize(
    "body, code",
    [
        (b"{not json", -32700),
        (b"[" * 200 + b"]" * 200, -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"x": NaN}}', -32700),
        (json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "a:b"}}]).encode(), -32600),
        (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/drop", "params": {}}).encode(), -32601),
        (json.dumps({"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {}}).encode(), -32600),
        (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 7}}).encode(), -32602),
        (
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER"}}}
            ).encode(),
            -32602,
        ),
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "x"}]}},
                }
            ).encode(),
            -32602,
        ),
        (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}).encode(), -32001),
    ],
)
async def test_hostile_json_rpc_is_a_json_rpc_error_and_writes_nothing(served, body, code):
    before = await thread_count(served.url, served.keys["alice"])
    answer = await rpc(served.url, served.keys["alice"], None, raw=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["error"]["code"] == code, answer.text
    assert await thread_count(served.url, served.keys["alice"]) == before


async def test_oversized_and_unauthenticated_requests_are_refused_before_json_rpc(served):
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x" * BODY_LIMIT}}
    too_big = await rpc(served.url, served.keys["alice"], body)
    # The edge refuses it before any app reads it (core.http.edge), in /api/'s form.
    assert too_big.status_code == 413 and "payload_too_large" in too_big.text, too_big.text
    unknown = await rpc(served.url, "not-a-key", {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}})
    assert unknown.status_code == 401 and unknown.json()["code"] == "unauthorized", unknown.text
    async with httpx.AsyncClient(timeout=30) as http:
        put = await http.put(f"{served.url}/a2a/intake", headers={"x-api-key": served.keys["alice"]})
        assert put.status_code == 405 and put.json()["code"] == "method_not_allowed", (put.headers, put.text)


async def reconnect_continues(url_first: str, url_then: str, key: str) -> None:
    """A stream read a little and dropped; the task subscribed to at
    `url_then`: the task, its reply whole from the first token, the end."""
    first = await client_for(url_first, key, streaming=True)
    then = await client_for(url_then, key, streaming=True)
    request = SendMessageRequest(message=user_message("Hello, my name is Ada Lovelace"))
    stream = first.send_message(request)
    seen = []
    async for event in stream:
        seen.append(event)
        if len([e for e in seen if e.HasField("artifact_update")]) == 2:
            break
    await stream.aclose()
    task_id = seen[0].task.id
    events = [event async for event in then.subscribe(SubscribeToTaskRequest(id=task_id))]
    assert events[0].HasField("task") and events[0].task.id == task_id
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, events[-1]
    pieces = [e.artifact_update for e in events if e.HasField("artifact_update")]
    got = "".join(texts(p.artifact) for p in pieces)
    assert not pieces[0].append and all(p.append for p in pieces[1:])
    reply = texts((await then.get_task(GetTaskRequest(id=task_id))).artifacts[0])
    assert got == reply
    early = "".join(texts(e.artifact_update.artifact) for e in seen if e.HasField("artifact_update"))
    assert reply.startswith(early) and len(early) < len(reply)
    # A task that ended takes no subscriber.
    with pytest.raises(A2AError, match="ended"):
        await anext(then.subscribe(SubscribeToTaskRequest(id=task_id)))


async def test_a_dropped_stream_is_taken_up_again_by_subscribing(served):
    async with asyncio.timeout(TEST_SECONDS):
        await reconnect_continues(served.url, served.url, served.keys["alice"])


@pytest.mark.postgres_only
async def test_a_dropped_stream_is_taken_up_again_on_another_process(served):
    other = Server(
        log_path=served.folder / "other.log", env=served.server.env | {"AGENT_OFFLINE_TOKEN_DELAY_MS": TOKEN_DELAY_MS}
    )
    try:
        other.start()
        async with asyncio.timeout(TEST_SECONDS):
            await reconnect_continues(served.url, other.url, served.keys["alice"])
    finally:
        other.stop()
