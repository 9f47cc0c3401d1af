"""The forms a turn's request takes (turns_app/graph_input.py): /api/'s text
turn is one case of the graph's input, and a graph that ends without a
reply fails an /api/ turn but not an Agent Protocol run
(docs/graphs.md, "The contract")."""

from __future__ import annotations

import json

import pytest

from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from turns_app.execution import TurnRun, await_turn, start_turn
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

PROTOCOL = {"assistant_id": "silent", "stream_mode": []}


@pytest.fixture
def graphs(settings):
    settings.AGENT_GRAPHS = {**settings.AGENT_GRAPHS, "silent": "tests.fixtures.graphs:silent_graph"}
    return settings


async def run(request: dict, key: str = "s1") -> dict:
    started = await start_turn(owner="alice", key=key, request=request, idempotency_key=None, graph="silent")
    assert isinstance(started, TurnRun)
    return json.loads(await await_turn(started))


def turns(key: str) -> list[AgentTurn]:
    return list(AgentTurn.objects.filter(session__key=key).order_by("number"))


async def test_an_api_turn_needs_a_reply_a_protocol_run_does_not(api, graphs):
    created = await api.call("POST", "/sessions", {"key": "s1", "graph": "silent"})
    assert created.status_code == 201, created.content
    answer = await api.chat("s1", "hello")
    assert answer.status_code == 502, answer.content
    assert json.loads(answer.content)["error"]["code"] == "model_error"
    assert [t.status for t in await orm(turns, key="s1")] == ["aborted"]

    body = await run(
        {"input": {"messages": [{"role": "user", "content": "hello", "id": "mine"}]}, "protocol": PROTOCOL}
    )
    assert (body["status"], body["reply"]) == ("committed", "")
    [_, turn] = await orm(turns, key="s1")
    assert [m["data"]["id"] for m in turn.messages] == ["mine"]
    assert turn.values == {"turns_seen": 1}
    # The text form is the same input, its message id the turn's.
    body = await run({"text": "again", "client_mode": "chat", "need_form_update": True, "protocol": PROTOCOL})
    [*_, last] = await orm(turns, key="s1")
    assert [m["data"]["id"] for m in last.messages] == [f"{last.id}:user"]
    assert last.values == {"turns_seen": 2}
    assert await orm(lambda: AgentSession.objects.get(key="s1").version) == 2
