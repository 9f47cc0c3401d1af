"""Hostile assistant requests on /langgraph/, through the whole ASGI
application: each a clear 4xx in the protocol's `{"detail", "code"}` shape
that writes nothing (no assistant, no version, no thread, no turn); system
assistants are read-only; a run's bad config or context is refused before
a turn is claimed."""

from __future__ import annotations

import pytest

from assistants_app.models import Assistant, AssistantVersion
from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from tests.langgraph_api.test_hostile_input import assert_protocol_error, call
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

GRAPHS = {"intake": "graphs.intake.graph:build_intake_graph", "config": "tests.fixtures.graphs:build_config_graph"}
HUGE = {"blob": "x" * (17 * 1024)}


@pytest.fixture(autouse=True)
def _graphs(settings):
    settings.AGENT_GRAPHS = GRAPHS
    settings.AGENT_GRAPH = "intake"


def _counts() -> tuple[int, int, int, int]:
    return (
        Assistant.objects.count(),
        AssistantVersion.objects.count(),
        AgentSession.objects.count(),
        AgentTurn.objects.count(),
    )


async def counts() -> tuple[int, int, int, int]:
    return await orm(_counts)


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"graph_id": "nope"}, 422, "unknown_graph"),
        ({"graph_id": ["config"]}, 422, "validation_error"),
        ({"graph_id": "config", "assistant_id": "not-a-uuid"}, 422, "validation_error"),
        ({"graph_id": "config", "config": "fast"}, 422, "validation_error"),
        ({"graph_id": "config", "config": {"configurable": ["a"]}}, 422, "validation_error"),
        ({"graph_id": "config", "config": {"recursion_limit": "9"}}, 422, "validation_error"),
        ({"graph_id": "config", "config": {"recursion_limit": 0}}, 422, "validation_error"),
        ({"graph_id": "config", "config": {"tags": [1]}}, 422, "validation_error"),
        ({"graph_id": "config", "config": {"callbacks": []}}, 422, "validation_error"),
        ({"graph_id": "config", "context": [1, 2]}, 422, "validation_error"),
        ({"graph_id": "config", "metadata": HUGE}, 422, "validation_error"),
        ({"graph_id": "config", "config": {"configurable": HUGE}}, 422, "validation_error"),
        ({"graph_id": "config", "context": HUGE}, 422, "validation_error"),
        ({"graph_id": "config", "name": "n" * 256}, 422, "validation_error"),
        ({"graph_id": "config", "if_exists": "update"}, 422, "validation_error"),
    ],
)
async def test_a_bad_create_writes_nothing(alice, body, status, code):
    before = await counts()
    assert_protocol_error(await call("POST", "/langgraph/assistants", body, key=alice), status, code)
    assert await counts() == before


async def test_bad_patches_versions_and_the_system_assistants(alice, bob):
    made = await call("POST", "/langgraph/assistants", {"graph_id": "config", "name": "a"}, key=alice)
    assert made.status == 200, made
    aid = made.json()["assistant_id"]
    system = (await call("GET", "/langgraph/assistants/config", key=alice)).json()["assistant_id"]
    before = await counts()
    base = f"/langgraph/assistants/{aid}"
    for body in ({"graph_id": "nope"}, {"metadata": HUGE}, {"config": {"configurable": 3}}, {"name": 5}):
        code = "unknown_graph" if body.get("graph_id") else "validation_error"
        assert_protocol_error(await call("PATCH", base, body, key=alice), 422, code)
    assert_protocol_error(await call("POST", f"{base}/latest", {"version": 7}, key=alice), 404, "assistant_not_found")
    assert_protocol_error(await call("POST", f"{base}/latest", {"version": "1"}, key=alice), 422)
    for answer in (
        await call("PATCH", base, {"name": "b"}, key=bob),
        await call("DELETE", base, key=bob),
        await call("POST", f"{base}/versions", {}, key=bob),
        await call("GET", f"{base}/schemas", key=bob),
        await call("GET", "/langgraph/assistants/0b7e6f1c-9a8d-4c1e-8f00-000000000000", key=alice),
    ):
        assert_protocol_error(answer, 404, "assistant_not_found")
    for raw in (system, "config"):
        assert_protocol_error(
            await call("PATCH", f"/langgraph/assistants/{raw}", {"name": "x"}, key=alice), 409, "system_assistant"
        )
        assert_protocol_error(await call("DELETE", f"/langgraph/assistants/{raw}", key=alice), 409, "system_assistant")
    assert_protocol_error(
        await call("POST", "/langgraph/assistants", {"graph_id": "config", "assistant_id": system}, key=alice),
        409,
        "assistant_exists",
    )
    assert_protocol_error(await call("DELETE", f"{base}?delete_threads=true", key=alice), 422, "validation_error")
    assert_protocol_error(
        await call("POST", "/langgraph/assistants/search", {"metadata": {f"k{i}": i for i in range(65)}}, key=alice),
        422,
        "validation_error",
    )
    assert await counts() == before


@pytest.mark.parametrize(
    "body, status",
    [
        ({"config": {"configurable": {"tone": "a"}}, "context": {"max_words": 3}}, 400),
        ({"context": {"max_words": "many"}}, 422),
        ({"config": {"recursion_limit": -1}}, 422),
        ({"context": "prompt"}, 422),
    ],
)
async def test_a_run_with_bad_config_or_context_claims_nothing(alice, body, status):
    made = await call("POST", "/langgraph/assistants", {"graph_id": "config"}, key=alice)
    aid = made.json()["assistant_id"]
    before = await counts()
    run = {"assistant_id": aid, "input": {"messages": [{"role": "user", "content": "hi"}]}, **body}
    assert_protocol_error(await call("POST", "/langgraph/runs/wait", run, key=alice), status, "validation_error")
    assert await counts() == before


async def test_a_run_on_an_unknown_or_foreign_assistant_is_an_invalid_assistant(alice, bob):
    made = await call("POST", "/langgraph/assistants", {"graph_id": "config"}, key=alice)
    before = await counts()
    for aid in (made.json()["assistant_id"], "0b7e6f1c-9a8d-4c1e-8f00-000000000000", "nope"):
        run = {"assistant_id": aid, "input": {"messages": [{"role": "user", "content": "hi"}]}}
        body = assert_protocol_error(await call("POST", "/langgraph/runs/wait", run, key=bob), 422)
        assert "Invalid assistant" in body["detail"]
    assert await counts() == before
