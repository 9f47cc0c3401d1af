"""Assistants as LangGraph's server has them (docs/agent-protocol.md,
"Assistants"), through the LangGraph Python SDK (unmodified) against a real
daphne, on both databases: create, get, update (a new version, metadata
merged), versions, set latest, search and count with the system assistants,
delete; each owner sees only its own; a run uses the assistant's config and
context merged with its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from assistants_app.models import Assistant, AssistantVersion
from tests.fixtures.runners import orm

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 90
GRAPHS = "intake=graphs.intake.graph:build_intake_graph,config=tests.fixtures.graphs:build_config_graph"


def human(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def reply(values: Any) -> str:
    return values["messages"][-1]["content"]


async def test_assistant_crud_versions_and_runs_through_the_sdk(servers, alice, bob):
    server = servers(AGENT_GRAPHS=GRAPHS, AGENT_GRAPH="intake")
    client = get_client(url=f"{server.url}/langgraph", api_key=alice)
    other = get_client(url=f"{server.url}/langgraph", api_key=bob)
    async with asyncio.timeout(TEST_SECONDS):
        made = await client.assistants.create(
            graph_id="config",
            config={"configurable": {"tone": "dry"}},
            context={"system_prompt": "You are a pirate."},
            metadata={"team": "blue"},
            name="pirate",
            description="talks like a pirate",
        )
        aid = made["assistant_id"]
        assert (made["graph_id"], made["name"], made["version"]) == ("config", "pirate", 1)
        assert made["context"] == {"system_prompt": "You are a pirate."}
        assert (await client.assistants.get(aid))["description"] == "talks like a pirate"
        with pytest.raises(ConflictError):
            await client.assistants.create(graph_id="config", assistant_id=aid)
        same = await client.assistants.create(graph_id="config", assistant_id=aid, if_exists="do_nothing")
        assert same["version"] == 1

        # A thread's run: the assistant's context and configurable, the run's over them.
        thread = await client.threads.create()
        values = await client.runs.wait(thread["thread_id"], aid, input=human("hi"))
        assert reply(values) == "You are a pirate.|50|dry"
        values = await client.runs.wait(thread["thread_id"], aid, input=human("again"), context={"max_words": 7})
        assert reply(values) == "You are a pirate.|7|dry"
        stateless = await client.runs.wait(None, aid, input=human("x"), config={"configurable": {"tone": "wry"}})
        assert reply(stateless) == "You are a pirate.|50|wry"
        assert (await client.threads.get(thread["thread_id"]))["metadata"]["assistant_id"] == aid

        updated = await client.assistants.update(
            aid, metadata={"stage": "beta"}, context={"system_prompt": "Be brief."}
        )
        assert updated["version"] == 2
        assert updated["metadata"] == {"team": "blue", "stage": "beta"}
        values = await client.runs.wait(thread["thread_id"], aid, input=human("now"))
        assert reply(values) == "Be brief.|50|dry"
        versions = await client.assistants.get_versions(aid)
        assert [v["version"] for v in versions] == [2, 1]
        back = await client.assistants.set_latest(aid, 1)
        assert (back["version"], back["context"], back["metadata"]) == (1, made["context"], {"team": "blue"})
        # A patch after going back is a new version, past every earlier one.
        assert (await client.assistants.update(aid, name="pirate 3"))["version"] == 3

        found = await client.assistants.search(metadata={"team": "blue"})
        assert [a["assistant_id"] for a in found] == [aid]
        everything = await client.assistants.search(limit=10)
        assert {a["graph_id"] for a in everything} == {"intake", "config"} and len(everything) == 3
        assert [a["assistant_id"] for a in await client.assistants.search(limit=1, offset=2)] != []
        paged = [a["assistant_id"] for o in range(3) for a in await client.assistants.search(limit=1, offset=o)]
        assert sorted(paged) == sorted(a["assistant_id"] for a in everything)
        assert await client.assistants.count() == 3
        assert await client.assistants.count(graph_id="config") == 2
        system = await client.assistants.search(metadata={"created_by": "system"})
        assert {a["name"] for a in system} == {"intake", "config"}

        # Bob sees the system assistants, never Alice's.
        with pytest.raises(NotFoundError):
            await other.assistants.get(aid)
        with pytest.raises(NotFoundError):
            await other.assistants.update(aid, name="mine")
        assert await other.assistants.count() == 2
        mine = await other.assistants.create(graph_id="config", assistant_id=aid)
        assert mine["assistant_id"] == aid  # his own, under the same id

        await client.assistants.delete(aid)
        with pytest.raises(NotFoundError):
            await client.assistants.get(aid)
        assert (await other.assistants.get(aid))["version"] == 1
    rows = await orm(lambda: sorted(Assistant.objects.values_list("owner", "version")))
    assert rows == [("bob", 1)]
    assert await orm(lambda: AssistantVersion.objects.count()) == 1
