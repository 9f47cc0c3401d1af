"""The LangGraph Python SDK (`langgraph_sdk`, unmodified) against real daphne
processes serving /langgraph/, on both databases (docs/agent-protocol.md,
"Supported"): a whole session, interrupts and their resume, edit and regenerate
from history, the busy and error paths, and — on PostgreSQL — joining a
run's stream on another process after Last-Event-ID."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from turns_app.models import AgentTurn, AgentTurnEvent

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 90
BOOKING_TEXT = "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace"


def client_for(server, key: str):
    return get_client(url=f"{server.url}/langgraph", api_key=key)


def human(text) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def ai_text(values: dict) -> str:
    return values["messages"][-1]["content"]


def committed_turns(key: str) -> list[AgentTurn]:
    session = AgentSession.objects.get(key=key)
    return list(AgentTurn.objects.filter(session=session, status__in=["committed", "interrupted"]).order_by("number"))


async def refused(call) -> httpx.Response:
    """The response of a call the server refused. runs.wait/join raise
    httpx's own HTTPStatusError (the SDK's typed errors subclass it)."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    return caught.value.response


async def collect(stream) -> list:
    return [part async for part in stream]


def check_stream_shape(parts) -> None:
    """metadata first, end last, ids strictly rising."""
    assert parts[0].event == "metadata", parts[0]
    assert parts[-1].event == "end", parts[-1]
    ids = [int(p.id) for p in parts]
    assert ids == sorted(set(ids)), ids


async def test_a_whole_session_through_the_python_sdk(servers, alice):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="20")
    client = client_for(server, alice)
    async with asyncio.timeout(TEST_SECONDS):
        assistants = await client.assistants.search()
        assert {a["graph_id"] for a in assistants} == {"intake", "booking"}
        thread = await client.threads.create(metadata={"purpose": "sdk-test"})
        tid = thread["thread_id"]
        assert thread["status"] == "idle"

        created: list[dict] = []
        parts = await collect(
            client.runs.stream(
                tid,
                "intake",
                input=human("Hello, my name is Ada Lovelace"),
                stream_mode=["values", "updates", "messages-tuple"],
                on_run_created=created.append,
            )
        )
        check_stream_shape(parts)
        run_id = parts[0].data["run_id"]
        assert created == [{"run_id": run_id, "thread_id": tid}]  # from Content-Location
        assert {p.event for p in parts} == {"metadata", "values", "updates", "messages", "end"}
        # The message tuples concatenate to the final AI message the values hold.
        final_values = [p for p in parts if p.event == "values"][-1].data
        reply = final_values["messages"][-1]
        chunks = [p.data[0] for p in parts if p.event == "messages" and p.data[0]["id"] == reply["id"]]
        assert len(chunks) > 3
        assert "".join(c["content"] for c in chunks) == reply["content"]
        assert all(p.data[1]["langgraph_node"] == "reply" for p in parts if p.event == "messages")

        state = await client.threads.get_state(tid)
        assert state["values"] == final_values
        waited = await client.runs.wait(tid, "intake", input=human("ada@example.com"))
        state = await client.threads.get_state(tid)
        assert waited == state["values"]
        assert state["values"]["fields"]["email"] == "ada@example.com"
        assert waited["messages"][-2]["content"] == "ada@example.com"

        # History: newest first; a checkpoint per step of each run (its
        # input, then after `__start__`, `extract` and `reply`), each the
        # parent of the next.
        history = await client.threads.get_history(tid, limit=100)
        runs = await client.runs.list(tid)
        assert [r["status"] for r in runs] == ["success", "success"]
        finals = [h for h in history if h["metadata"]["source"] == "loop" and not h["next"]]
        assert [h["metadata"]["run_id"] for h in finals] == [r["run_id"] for r in runs]
        ids = [h["checkpoint"]["checkpoint_id"] for h in history]
        assert ids == sorted(ids, reverse=True)
        assert [h["parent_checkpoint"]["checkpoint_id"] for h in history[:-1]] == ids[1:]
        assert history[0]["checkpoint"] == state["checkpoint"]
        assert [len(h["values"]["messages"]) for h in history] == [4, 3, 3, 3, 2, 1, 1, 1, 0]
        assert [h["metadata"]["step"] for h in history] == [2, 1, 0, -1, 2, 1, 0, -1, -1]
        assert [h["next"] for h in history[:4]] == [[], ["reply"], ["extract"], ["__start__"]]

        # A cancelled run leaves nothing committed.
        before = await client.threads.get_state(tid)
        run = await client.runs.create(tid, "intake", input=human("I would like to book for 4 people"))
        await client.runs.cancel(tid, run["run_id"], wait=True)
        assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
        assert (await client.threads.get_state(tid)) == before
        assert len(await orm(committed_turns, key=tid)) == 2
        # Nor any checkpoint of its steps.
        assert await client.threads.get_history(tid, limit=100) == history

        # Copy: the same history on a new thread; delete: 404 afterwards.
        copy = await client.threads.copy(tid)
        assert copy["thread_id"] != tid
        assert copy["values"] == before["values"]
        assert copy["metadata"]["purpose"] == "sdk-test"

        found = await client.threads.search(metadata={"purpose": "sdk-test"})
        assert {t["thread_id"] for t in found} == {tid, copy["thread_id"]}
        assert all(t["values"]["messages"] for t in found)
        found = await client.threads.search(metadata={"graph_id": "intake", "purpose": "sdk-test"}, limit=1)
        assert len(found) == 1
        assert await client.threads.search(metadata={"purpose": "nothing"}) == []

        await client.threads.delete(tid)
        with pytest.raises(NotFoundError):
            await client.threads.get(tid)
        with pytest.raises(NotFoundError):
            await client.runs.get(tid, run_id)
    assert await orm(lambda: AgentTurn.objects.filter(session__key=tid).count()) == 0
    assert await orm(lambda: AgentSession.objects.get(key=tid).deleted_at is not None)


async def test_booking_interrupt_and_resume_with_a_command(servers, alice):
    server = servers()
    client = client_for(server, alice)
    async with asyncio.timeout(TEST_SECONDS):
        thread = await client.threads.create()
        tid = thread["thread_id"]
        parts = await collect(client.runs.stream(tid, "booking", input=human(BOOKING_TEXT), stream_mode="values"))
        check_stream_shape(parts)
        paused = parts[-2].data
        [pending] = paused["__interrupt__"]
        assert pending["value"]["action_requests"][0]["name"] == "book_table"
        thread = await client.threads.get(tid)
        assert thread["status"] == "interrupted"
        assert thread["metadata"]["graph_id"] == "booking"
        state = await client.threads.get_state(tid)
        assert state["next"] and state["tasks"][0]["interrupts"][0]["id"] == pending["id"]
        run = (await client.runs.list(tid))[0]
        assert run["status"] == "success"  # LangGraph: a paused run succeeded; the thread waits

        # The resume goes through, command winning over the empty input
        # agent-chat-ui sends. (A new input while the graph waits starts a
        # new run from the paused state: test_run_semantics.py.)
        done = await client.runs.wait(
            tid, "booking", input={}, command={"resume": {"decisions": [{"type": "approve"}]}}
        )
        assert "BK-" in ai_text(done)
        assert (await client.threads.get(tid))["status"] == "idle"
        assert await orm(lambda: AgentSession.objects.get(key=tid).interrupt) is None
        # Resuming again has nothing to resume.
        answer = await refused(client.runs.wait(tid, "booking", command={"resume": {"action": "approve"}}))
        assert (answer.status_code, answer.json()["code"]) == (409, "interrupt_resolved")
        # The thread's graph is fixed once it ran.
        answer = await refused(client.runs.wait(tid, "intake", input=human("hi")))
        assert (answer.status_code, answer.json()["code"]) == (409, "graph_mismatch")


async def test_edit_and_regenerate_from_history_checkpoints(servers, alice):
    server = servers()
    client = client_for(server, alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "intake", input=human("Hello"))
        await client.runs.wait(tid, "intake", input=human("Ada Lovelace"))
        history = await client.threads.get_history(tid)
        second_input = next(
            h for h in history if h["metadata"]["source"] == "input" and len(h["values"]["messages"]) == 3
        )

        # Regenerate: from the state just before the second reply, no input.
        again = await client.runs.wait(tid, "intake", checkpoint=second_input["checkpoint"])
        assert again["messages"][-2:][0]["content"] == "Ada Lovelace"
        assert len(again["messages"]) == 4
        # Edit: from the state before the second message, with another one.
        edited = await client.runs.wait(
            tid, "intake", input=human("Grace Hopper"), checkpoint=second_input["parent_checkpoint"]
        )
        assert [m["content"] for m in edited["messages"]][2] == "Grace Hopper"
        assert len(edited["messages"]) == 4
        assert (await client.threads.get_state(tid))["values"] == edited
        # The abandoned branches stay in history: three replies to turn two.
        history = await client.threads.get_history(tid, limit=100)
        assert sum(1 for h in history if h["metadata"]["source"] == "loop" and not h["next"]) == 4
        turns = await orm(lambda: list(AgentTurn.objects.filter(session__key=tid).order_by("number")))
        assert [t.superseded_at is not None for t in turns] == [False, True, True, False]

        # A state update at the current checkpoint moves it on; at one the
        # thread has moved on from, it forks from there.
        current = await client.threads.get_state(tid)
        moved = await client.threads.update_state(
            tid, {"fields": {"party_size": 3}}, checkpoint_id=current["checkpoint"]["checkpoint_id"]
        )
        assert moved["checkpoint"]["checkpoint_id"] > current["checkpoint"]["checkpoint_id"]
        assert (await client.threads.get_state(tid))["values"]["fields"]["party_size"] == 3
        await client.threads.update_state(
            tid, {"fields": {"party_size": 5}}, checkpoint_id=current["checkpoint"]["checkpoint_id"]
        )
        forked = await client.threads.get_state(tid)
        assert forked["parent_checkpoint"]["checkpoint_id"] == current["checkpoint"]["checkpoint_id"]
        assert forked["values"]["fields"]["party_size"] == 5
        with pytest.raises(UnprocessableEntityError):
            await client.threads.update_state(tid, {"no_such_channel": []})
        with pytest.raises(UnprocessableEntityError):
            await client.threads.update_state(tid, {"fields": {"party_size": "many"}})
        assert (await client.threads.get_state(tid))["values"]["fields"]["party_size"] == 5


async def test_errors_and_multitask_strategies(servers, alice, bob):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="50")
    client = client_for(server, alice)
    async with asyncio.timeout(TEST_SECONDS):
        with pytest.raises(NotFoundError):
            await client.threads.get("no-such-thread")
        assert (await refused(client.runs.wait("no-such-thread", "intake", input=human("hi")))).status_code == 404
        answer = await refused(client.runs.wait(None, "no-such-graph", input=human("hi")))
        assert answer.status_code == 422 and "Invalid assistant" in answer.json()["detail"]
        tid = (await client.threads.create())["thread_id"]
        with pytest.raises(ConflictError):
            await client.threads.create(thread_id=tid)
        assert (await client.threads.create(thread_id=tid, if_exists="do_nothing"))["thread_id"] == tid
        # Another owner's thread does not exist for bob.
        with pytest.raises(NotFoundError):
            await client_for(server, bob).threads.get(tid)
        unknown = {"messages": [{"role": "user", "content": "hi"}], "no_such_channel": 1}
        assert (await refused(client.runs.wait(tid, "intake", input=unknown))).status_code == 422

        # Content blocks reach the graph as they are.
        content = [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]
        values = await client.runs.wait(tid, "intake", input={"messages": [{"type": "human", "content": content}]})
        assert values["messages"][0]["content"] == content

        # reject: a busy thread answers 409 at once; interrupt: cancels it first.
        slow = await client.runs.create(tid, "intake", input=human("Ada Lovelace"))
        answer = await refused(client.runs.wait(tid, "intake", input=human("again"), multitask_strategy="reject"))
        assert answer.status_code == 409 and "already running" in answer.json()["detail"]
        values = await client.runs.wait(tid, "intake", input=human("Grace Hopper"), multitask_strategy="interrupt")
        assert (await client.runs.get(tid, slow["run_id"]))["status"] == "interrupted"
        assert [m["content"] for m in values["messages"] if m["type"] == "human"] == [content, "Grace Hopper"]

        # Stateless: a throwaway thread, gone afterwards.
        before = await orm(lambda: AgentSession.objects.filter(deleted_at__isnull=True).count())
        values = await client.runs.wait(None, "intake", input=human("Hello"))
        assert values["messages"][-1]["type"] == "ai"
        await asyncio.sleep(0.5)
        assert await orm(lambda: AgentSession.objects.filter(deleted_at__isnull=True).count()) == before


async def test_idempotency_key_on_run_creation(servers, alice):
    server = servers()
    async with asyncio.timeout(TEST_SECONDS), httpx.AsyncClient(base_url=f"{server.url}/langgraph", timeout=30) as http:
        headers = {"x-api-key": alice, "Idempotency-Key": "run-1"}
        thread = (await http.post("/threads", json={}, headers=headers)).json()
        body = {"assistant_id": "intake", "input": human("Hello")}
        first = await http.post(f"/threads/{thread['thread_id']}/runs/wait", json=body, headers=headers)
        again = await http.post(f"/threads/{thread['thread_id']}/runs/wait", json=body, headers=headers)
        assert first.status_code == again.status_code == 200
        assert first.json() == again.json()
        assert first.headers["content-location"] == again.headers["content-location"]
        other = await http.post(
            f"/threads/{thread['thread_id']}/runs/wait", json={**body, "input": human("Bye")}, headers=headers
        )
        assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"
    [turn] = await orm(committed_turns, key=thread["thread_id"])
    # Nobody streams a wait: no LangGraph-native parts were logged for it,
    # and no tokens (protocol streams never carry our deltas).
    logged = await orm(lambda: set(AgentTurnEvent.objects.filter(turn=turn).values_list("event", flat=True)))
    assert logged == {"turn", "fields", "done"}


@pytest.mark.postgres_only
async def test_join_stream_on_another_process_continues_without_gap(servers, alice):
    a = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="40")
    b = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="40")
    on_a, on_b = client_for(a, alice), client_for(b, alice)
    async with asyncio.timeout(TEST_SECONDS):
        tid = (await on_a.threads.create())["thread_id"]
        seen = []
        async for part in on_a.runs.stream(
            tid,
            "intake",
            input=human("Hello, I am Ada"),
            stream_mode=["values", "messages-tuple"],
            on_disconnect="continue",
        ):
            seen.append(part)
            if sum(1 for p in seen if p.event == "messages") == 3:
                break  # the client drops the connection mid-reply
        run_id = seen[0].data["run_id"]
        rest = await collect(on_b.runs.join_stream(tid, run_id, last_event_id=seen[-1].id))
    assert rest[-1].event == "end"
    whole = seen + rest
    ids = [int(p.id) for p in whole]
    assert ids == sorted(set(ids))
    logged = await orm(
        lambda: list(
            AgentTurnEvent.objects.filter(turn_id=run_id, event__in=["turn", "values", "messages", "done"])
            .order_by("seq")
            .values_list("seq", flat=True)
        )
    )
    assert ids == logged  # nothing missing, nothing twice
    reply = [p for p in whole if p.event == "values"][-1].data["messages"][-1]
    assert "".join(p.data[0]["content"] for p in whole if p.event == "messages") == reply["content"]
    committed = await orm(lambda: json.loads(AgentTurn.objects.get(pk=run_id).result)["reply"])
    assert committed == reply["content"]
