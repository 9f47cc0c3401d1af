"""A thread's history under /langgraph/ is bounded by what it answers
(docs/agent-protocol.md, "History"): filters run before any state's values
are built, only the states answered are built, an answer stops at a byte
budget and says where to page on, it is rendered off the event loop, and a
malformed `before` is a 422, never a 500."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import AsyncClient

from langgraph_app import history, threads
from langgraph_app.api import api as protocol_api
from tests.fixtures.api import Api

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 5
# A turn of the intake graph is four checkpoints: its input, then after the
# steps `__start__`, `extract` and `reply` (the last the state after it).
LOOP_STEPS = 3
STATES = 1 + (1 + LOOP_STEPS) * TURNS  # and the start


@pytest.fixture
async def long_thread(alice) -> str:
    chat = Api(alice)
    for n in range(TURNS):
        response = await chat.chat("long", f"message {n}")
        assert response.status_code == 200, response.content
    return "long"


@pytest.fixture
def reads(monkeypatch) -> list[Any]:
    """The conversations read to build states' values."""
    seen: list[Any] = []
    real = threads.messages_up_to

    def counting(turn_id):
        seen.append(turn_id)
        return real(turn_id)

    monkeypatch.setattr(threads, "messages_up_to", counting)
    return seen


async def post_history(alice: str, key: str, body: Any):
    return await AsyncClient().post(
        f"/langgraph/threads/{key}/history", data=body, content_type="application/json", headers={"x-api-key": alice}
    )


async def test_a_filter_that_matches_nothing_builds_no_values(alice, long_thread, reads):
    response = await post_history(alice, long_thread, {"limit": 1000, "metadata": {"source": "nothing"}})
    assert response.status_code == 200 and json.loads(response.content) == []
    assert reads == []
    response = await post_history(alice, long_thread, {"limit": 1000, "metadata": {"source": "loop"}})
    assert len(json.loads(response.content)) == LOOP_STEPS * TURNS
    # A turn's steps share its conversation: read once for all of them.
    assert len(reads) <= TURNS


async def test_only_the_states_answered_are_built(alice, long_thread, reads):
    response = await post_history(alice, long_thread, {"limit": 3})
    assert len(json.loads(response.content)) == 3
    assert len(reads) <= 3
    reads.clear()
    everything = json.loads((await post_history(alice, long_thread, {"limit": 1000})).content)
    assert len(everything) == STATES
    # Neighbouring states share their conversation: read once for both.
    assert len(reads) <= TURNS + 1


async def test_an_answer_stops_at_its_byte_budget_and_pages_on_with_before(alice, long_thread, monkeypatch):
    everything = await post_history(alice, long_thread, {"limit": 1000})
    assert history.NEXT_HEADER not in everything
    states = json.loads(everything.content)
    sizes = [len(json.dumps(s)) for s in states]
    budget = sum(sizes[:3])
    monkeypatch.setattr(history, "HISTORY_MAX_BYTES", budget)
    paged: list[dict] = []
    body: dict[str, Any] = {"limit": 1000}
    for _ in range(STATES):
        response = await post_history(alice, long_thread, body)
        page = json.loads(response.content)
        assert page, "a page always holds a state"
        assert len(response.content) < budget + max(sizes) + 2 * len(page) + 2
        paged += page
        next_before = response.headers.get(history.NEXT_HEADER)
        if next_before is None:
            break
        assert next_before == page[-1]["checkpoint"]["checkpoint_id"]
        body = {"limit": 1000, "before": {"configurable": {"checkpoint_id": next_before}}}
    assert paged == states
    assert len(states) > 3  # it did page


async def test_the_limit_says_where_to_page_on_when_older_states_match(alice, long_thread):
    response = await post_history(alice, long_thread, {"limit": 2})
    page = json.loads(response.content)
    assert response.headers[history.NEXT_HEADER] == page[-1]["checkpoint"]["checkpoint_id"]
    everything = json.loads((await post_history(alice, long_thread, {"limit": 1000})).content)
    first_run = everything[-2]["metadata"]["run_id"]  # the oldest run's input, just after the start
    wanted = {"run_id": first_run, "source": "input", "step": -1}
    oldest = await post_history(alice, long_thread, {"limit": 1, "metadata": wanted})
    assert len(json.loads(oldest.content)) == 1 and history.NEXT_HEADER not in oldest


async def test_history_is_rendered_off_the_event_loop(alice, long_thread, monkeypatch):
    built_on_loop: list[bool] = []
    real = threads.state_json

    def recording(*args, **kwargs):
        try:
            asyncio.get_running_loop()
            built_on_loop.append(True)
        except RuntimeError:
            built_on_loop.append(False)
        return real(*args, **kwargs)

    rendered: list[Any] = []
    real_render = protocol_api.renderer.render

    def render(request, data, **kw):
        rendered.append(data)
        return real_render(request, data, **kw)

    monkeypatch.setattr(threads, "state_json", recording)
    monkeypatch.setattr(protocol_api.renderer, "render", render)
    response = await post_history(alice, long_thread, {"limit": 1000})
    got = await AsyncClient().get(f"/langgraph/threads/{long_thread}/history?limit=1000", headers={"x-api-key": alice})
    assert json.loads(got.content) == json.loads(response.content)
    assert built_on_loop and not any(built_on_loop)
    assert rendered == []  # ninja's renderer (on the loop) never sees the states


MALFORMED_BEFORE = ["not-an-id", {"configurable": "x"}, {"configurable": ["x"]}, {"configurable": 5}, [1]]


@pytest.mark.parametrize("before", MALFORMED_BEFORE)
async def test_a_malformed_before_is_a_422(alice, long_thread, before):
    response = await post_history(alice, long_thread, {"before": before})
    assert response.status_code == 422, response.content
    answer = json.loads(response.content)
    assert {"detail", "code"} <= set(answer) and answer["code"] == "validation_error"


async def test_a_malformed_before_in_the_query_is_a_422(alice, long_thread):
    got = await AsyncClient().get(f"/langgraph/threads/{long_thread}/history?before=x", headers={"x-api-key": alice})
    assert got.status_code == 422 and json.loads(got.content)["code"] == "validation_error"
