"""The project's `@auth.on` resource handlers (docs/configuration.md,
"Resource handlers"), as LangGraph's server applies them, on a real daphne
driven by the unmodified LangGraph SDK: two users of one tenant (one owner
in the database, so only the handlers keep them apart) each stamped as the
owner of what they make; neither reads, updates, deletes, searches,
counts, prunes or runs on the other's threads (over HTTP, SSE and the
thread stream alike), nor sees the other's assistants, and each has its
own store namespaces; a search's page and count are of the caller's rows
only, and a handler's refusal is its status with nothing written. One
server for the module (one test, in parts, so one start-up)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.system.server import Server

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 120
AUTH_PY = """
from langgraph_sdk import Auth

auth = Auth()
USERS = {"alice-token": "alice", "bob-token": "bob", "carol-token": "carol", "dave-token": "dave"}


@auth.authenticate
async def who(authorization: str | None) -> Auth.types.MinimalUserDict:
    scheme, _, token = (authorization or "").partition(" ")
    if token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    # One tenant: one identity (the owner), the handlers keep its users apart.
    return {"identity": "team", "user_id": USERS[token]}


def mine(ctx):
    return {"owner": ctx.user.user_id}


@auth.on.threads.create
@auth.on.threads.create_run
async def stamp_thread(ctx: Auth.types.AuthContext, value: dict):
    value.setdefault("metadata", {})
    value["metadata"]["owner"] = ctx.user.user_id
    return mine(ctx)


@auth.on.threads.search
async def search_threads(ctx: Auth.types.AuthContext, value: dict):
    # Failures on demand, to see each answered as LangGraph's server answers it.
    boom = (value.get("metadata") or {}).get("boom")
    if boom == "assert":
        assert False, "not this one"
    if boom == "value":
        raise ValueError("a bad search")
    if boom == "crash":
        raise RuntimeError("the handler's bug")
    if boom == "teapot":
        raise Auth.exceptions.HTTPException(status_code=418, detail="short and stout")
    if boom == "junk":
        return ["not", "a", "filter"]
    if ctx.user.user_id == "carol":
        return {"$or": [{"owner": "carol"}, {"shared": {"$eq": True}}]}
    if ctx.user.user_id == "dave":
        return {"tags": {"$contains": "red"}}
    return mine(ctx)


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: dict):
    return mine(ctx)


@auth.on.assistants.create
async def stamp_assistant(ctx: Auth.types.AuthContext, value: dict):
    value["metadata"]["owner"] = ctx.user.user_id
    return mine(ctx)


@auth.on.assistants
async def own_assistants(ctx: Auth.types.AuthContext, value: dict):
    # The graphs' own assistants are everyone's.
    return {"$or": [mine(ctx), {"created_by": "system"}]}


@auth.on.store
async def own_store(ctx: Auth.types.AuthContext, value: dict):
    # Each user's namespaces under its own first label, as LangGraph's docs scope a store.
    value["namespace"] = (ctx.user.user_id, *(value["namespace"] or ()))
    if ctx.action == "search" and ctx.user.user_id == "carol":
        return {"kind": "public"}
"""


@pytest.fixture
def server(servers, tmp_path) -> Server:
    (tmp_path / "team_auth.py").write_text(AUTH_PY)
    return servers(AGENT_AUTH_PATH=f"{tmp_path / 'team_auth.py'}:auth")


def client(server: Server, token: str):
    return get_client(url=f"{server.url}/langgraph", headers={"Authorization": f"Bearer {token}"})


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def status_and_code(error: pytest.ExceptionInfo) -> tuple[int, str]:
    response = error.value.response
    return response.status_code, response.json()["code"]


async def test_resource_handlers_scope_every_resource(server):
    """One server for the module: each resource's part in turn."""
    async with asyncio.timeout(TEST_SECONDS):
        await each_user_reads_writes_and_runs_on_its_own_threads_only(server)
        await filter_operators_and_failing_handlers(server)
        await each_user_sees_its_own_assistants_only(server)
        await each_user_has_a_store_of_its_own(server)


async def each_user_reads_writes_and_runs_on_its_own_threads_only(server: Server) -> None:
    alice, bob = client(server, "alice-token"), client(server, "bob-token")
    bob_raw = httpx.AsyncClient(base_url=server.url, headers={"Authorization": "Bearer bob-token"}, timeout=30)
    async with bob_raw:
        # The create handler stamps the owner over a forged one.
        first = await alice.threads.create(metadata={"owner": "bob", "topic": "a"})
        assert first["metadata"] == {"owner": "alice", "topic": "a"}
        tid = first["thread_id"]
        second = await alice.threads.create(metadata={"topic": "b"})
        theirs = [(await bob.threads.create(metadata={"topic": t}))["thread_id"] for t in "abc"]

        # Search and count: the filter is in the query, so pages and totals
        # are of the caller's threads (bob's three newer ones are not counted).
        assert await alice.threads.count() == 2
        assert await bob.threads.count() == 3
        assert {t["thread_id"] for t in await alice.threads.search()} == {tid, second["thread_id"]}
        page = await alice.threads.search(limit=1, offset=1, sort_by="created_at", sort_order="asc")
        assert [t["thread_id"] for t in page] == [second["thread_id"]]
        assert await alice.threads.search(metadata={"topic": "c"}) == []
        assert await alice.threads.search(limit=5, offset=2) == []

        # A run on alice's thread: hers to run, not bob's.
        values: Any = await alice.runs.wait(tid, "intake", input=human("hello"))
        assert values["messages"][-1]["type"] == "ai"
        run_id = (await alice.runs.list(tid))[0]["run_id"]

        # Bob: every read, write and run on her thread is a 404, as for a
        # thread that is not there.
        attempts = {
            "get": bob.threads.get(tid),
            "update": bob.threads.update(tid, metadata={"topic": "mine"}),
            "delete": bob.threads.delete(tid),
            "state": bob.threads.get_state(tid),
            "history": bob.threads.get_history(tid),
            "update_state": bob.threads.update_state(tid, {"messages": []}),
            "copy": bob.threads.copy(tid),
            "runs.create": bob.runs.create(tid, "intake", input=human("mine now")),
            "runs.wait": bob.runs.wait(tid, "intake", input=human("mine now")),
            "runs.list": bob.runs.list(tid),
            "runs.get": bob.runs.get(tid, run_id),
            "runs.join": bob.runs.join(tid, run_id),
            "runs.cancel": bob.runs.cancel(tid, run_id),
        }
        for name, attempt in attempts.items():
            with pytest.raises(httpx.HTTPStatusError) as missing:
                await attempt
            assert missing.value.response.status_code == 404, name
        streamed = await bob_raw.post(
            f"/langgraph/threads/{tid}/runs/stream", json={"assistant_id": "intake", "input": human("x")}
        )
        assert streamed.status_code == 404, streamed.text
        joined = await bob_raw.get(f"/langgraph/threads/{tid}/runs/{run_id}/stream")
        assert joined.status_code == 404, joined.text
        events = await bob_raw.post(f"/langgraph/threads/{tid}/stream/events", json={"channels": ["values"]})
        assert events.status_code == 404, events.text
        # The thread stream: a run.start command, and the WebSocket's handshake.
        command = {"id": 1, "method": "run.start", "params": {"assistant_id": "intake", "input": human("x")}}
        answer = (await bob_raw.post(f"/langgraph/threads/{tid}/commands", json=command)).json()
        assert answer["type"] == "error", answer
        socket_url = f"{server.url.replace('http', 'ws', 1)}/langgraph/threads/{tid}/stream/events"
        with pytest.raises(InvalidStatus) as refused:
            async with connect(socket_url, additional_headers={"Authorization": "Bearer bob-token"}):
                pass
        assert refused.value.response.status_code == 403
        async with connect(socket_url, additional_headers={"Authorization": "Bearer alice-token"}):
            pass

        # Prune: one thread of someone else's and nothing is pruned.
        with pytest.raises(httpx.HTTPStatusError) as pruned:
            await bob.threads.prune([theirs[0], tid])
        assert pruned.value.response.status_code == 404
        assert await bob.threads.count() == 3

        # Nothing bob tried changed her thread; it still has one run.
        kept = await alice.threads.get(tid)
        assert (kept["metadata"]["owner"], kept["metadata"]["topic"]) == ("alice", "a")
        assert len(await alice.runs.list(tid)) == 1
        assert (await bob.threads.prune([theirs[0]]))["pruned_count"] == 1
        assert await bob.threads.count() == 2

        # A thread a run makes is stamped by the create_run handler: bob's.
        made = str(uuid.uuid4())
        await bob.runs.wait(made, "intake", input=human("hi"), if_not_exists="create")
        assert (await bob.threads.get(made))["metadata"]["owner"] == "bob"
        with pytest.raises(NotFoundError):
            await alice.threads.get(made)
        # Nor may alice take it over by running on it with if_not_exists=create.
        with pytest.raises(httpx.HTTPStatusError) as taken:
            await alice.runs.wait(made, "intake", input=human("hi"), if_not_exists="create")
        assert taken.value.response.status_code == 404


async def filter_operators_and_failing_handlers(server: Server) -> None:
    alice, bob = client(server, "alice-token"), client(server, "bob-token")
    carol, dave = client(server, "carol-token"), client(server, "dave-token")
    shared = await bob.threads.create(metadata={"tags": ["red", "blue"]})
    await bob.threads.update(shared["thread_id"], metadata={"shared": True})
    await bob.threads.create(metadata={"tags": ["blue"], "shared": False, "owner": "x"})
    hers = await carol.threads.create()
    # $or and $eq: carol's own threads, and what bob shared.
    found = [t["thread_id"] for t in await carol.threads.search(limit=100)]
    assert sorted(found) == sorted([hers["thread_id"], shared["thread_id"]])
    assert await carol.threads.count() == 2
    # $contains: a list holding the item (bob's thread, from dave's search).
    assert [t["thread_id"] for t in await dave.threads.search()] == [shared["thread_id"]]
    assert await dave.threads.count(metadata={"shared": True}) == 1

    # Each failure answered as LangGraph's server answers it, in the
    # {"detail", "code"} contract, never an HTML page.
    cases = {"assert": (403, "forbidden"), "value": (400, "validation_error"), "teapot": (418, "auth_failed")}
    cases |= {"crash": (500, "internal_error"), "junk": (500, "internal_error")}
    for boom, expected in cases.items():
        with pytest.raises(httpx.HTTPStatusError) as failed:
            await alice.threads.search(metadata={"boom": boom})
        assert status_and_code(failed) == expected, boom
    assert "the AGENT_AUTH_PATH threads.search handler failed" in server.log_text()


async def each_user_sees_its_own_assistants_only(server: Server) -> None:
    alice, bob = client(server, "alice-token"), client(server, "bob-token")
    made = await alice.assistants.create(graph_id="intake", metadata={"owner": "bob"}, name="alice's")
    assert made["metadata"] == {"owner": "alice"}
    aid = made["assistant_id"]
    theirs = await bob.assistants.create(graph_id="intake", name="bob's")
    # Bob's search and count: his, and the graphs' system assistants.
    found = {a["assistant_id"]: a for a in await bob.assistants.search(limit=100)}
    assert aid not in found and theirs["assistant_id"] in found
    assert {a["metadata"].get("created_by") for i, a in found.items() if i != theirs["assistant_id"]} == {"system"}
    assert await bob.assistants.count() == len(found)
    assert [a["assistant_id"] for a in await bob.assistants.search(metadata={"owner": "alice"})] == []
    attempts = {
        "get": bob.assistants.get(aid),
        "update": bob.assistants.update(aid, name="mine"),
        "delete": bob.assistants.delete(aid),
        "versions": bob.assistants.get_versions(aid),
        "latest": bob.assistants.set_latest(aid, 1),
        "graph": bob.assistants.get_graph(aid),
        "schemas": bob.assistants.get_schemas(aid),
    }
    for name, attempt in attempts.items():
        with pytest.raises(httpx.HTTPStatusError) as missing:
            await attempt
        assert missing.value.response.status_code == 404, name
    # Nor may bob run alice's assistant: it is as unknown to him as no assistant.
    thread = (await bob.threads.create())["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await bob.runs.wait(thread, aid, input=human("hello"))
    assert refused.value.response.status_code == 422
    assert await bob.runs.list(thread) == []
    # Her id, by him, with if_exists=do_nothing: a conflict, not her assistant.
    with pytest.raises(httpx.HTTPStatusError) as taken:
        await bob.assistants.create(graph_id="intake", assistant_id=aid, if_exists="do_nothing")
    assert taken.value.response.status_code == 409
    kept = await alice.assistants.get(aid)
    assert (kept["name"], kept["version"]) == ("alice's", 1)
    values: Any = await alice.runs.wait(thread_id=None, assistant_id=aid, input=human("hello"))
    assert values["messages"][-1]["type"] == "ai"


async def each_user_has_a_store_of_its_own(server: Server) -> None:
    alice, bob = client(server, "alice-token"), client(server, "bob-token")
    await alice.store.put_item(["prefs"], "theme", {"dark": True})
    await bob.store.put_item(["prefs"], "theme", {"dark": False})
    await bob.store.put_item(["notes"], "n1", {"text": "bob's"})
    mine = await alice.store.get_item(["prefs"], "theme")
    assert mine is not None and (mine["namespace"], mine["value"]) == (["alice", "prefs"], {"dark": True})
    theirs = await bob.store.get_item(["prefs"], "theme")
    assert theirs is not None and theirs["value"] == {"dark": False}
    assert (await alice.store.list_namespaces())["namespaces"] == [["alice", "prefs"]]
    assert sorted((await bob.store.list_namespaces())["namespaces"]) == [["bob", "notes"], ["bob", "prefs"]]
    found = (await bob.store.search_items(["prefs"]))["items"]
    assert [(i["namespace"], i["value"]) for i in found] == [(["bob", "prefs"], {"dark": False})]
    assert (await alice.store.search_items(["notes"]))["items"] == []
    await alice.store.delete_item(["prefs"], "theme")
    assert await alice.store.get_item(["prefs"], "theme") is None
    assert (await bob.store.get_item(["prefs"], "theme") or {}).get("value") == {"dark": False}
    # A search handler's filter holds beside the client's.
    carol = client(server, "carol-token")
    for key, kind in (("a", "public"), ("b", "private")):
        await carol.store.put_item(["docs"], key, {"kind": kind})
    assert [i["key"] for i in (await carol.store.search_items(["docs"]))["items"]] == ["a"]
    assert (await carol.store.search_items(["docs"], filter={"kind": "private"}))["items"] == []
