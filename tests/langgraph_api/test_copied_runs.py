"""The turns of a forked session (/api/) or a copied thread (/langgraph/)
are finished turns like any other: their runs list as `success`, and join,
the join stream and the /api/ re-attach end in their outcome — not in
`stale_turn` ("deleted while the turn ran") or a 204 for a log that was
never copied (docs/api.md, "History, rewind and fork")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import AsyncClient

from tests.fixtures.runners import orm
from tests.turns_app.test_sse_consumer import Stream, names, reattach, stream_events
from turns_app.models import AgentTurn
from turns_app.services import turn_event_data

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def app():
    from agentsite.routing import build_application

    return build_application()


class Protocol:
    """/langgraph/'s JSON endpoints, in-process, with a key."""

    def __init__(self, key: str) -> None:
        self.client, self.headers = AsyncClient(), {"Authorization": f"Bearer {key}"}

    async def get(self, path: str):
        return await self.client.get(f"/langgraph{path}", headers=self.headers)

    async def post(self, path: str):
        path = f"/langgraph{path}"
        return await self.client.post(path, data={}, content_type="application/json", headers=self.headers)


def body(response) -> Any:
    return json.loads(response.content)


def turns_of(key: str) -> list[AgentTurn]:
    return list(AgentTurn.objects.filter(session__key=key).order_by("number"))


async def assert_copies_report_their_outcome(app, key: str, thread: str, originals: list[dict]) -> None:
    client = Protocol(key)
    copies = await orm(turns_of, key=thread)
    assert len(copies) == len(originals) and all(c.status == "committed" for c in copies)
    runs = body(await client.get(f"/threads/{thread}/runs"))
    assert {r["run_id"]: r["status"] for r in runs} == {str(c.id): "success" for c in copies}
    for copy, original in zip(copies, originals, strict=True):
        # /api/ re-attach: the copy's first event and its `done`, naming the copy.
        events = await stream_events(reattach(app, key, thread, copy.id))
        assert names(events) == ["turn", "done"], events
        assert events[0].data == turn_event_data(copy)
        done = events[1].json
        assert done == json.loads(copy.result)
        assert (done["turn_id"], done["version"], done["reply"]) == (str(copy.id), copy.version, original["reply"])
        # Holding the final event's id: nothing more (not a replay of the original's).
        status_only = reattach(app, key, thread, copy.id, last=events[-1].id)
        await status_only.start()
        assert status_only.status == 204
        await status_only.body()
        # The protocol's join and join stream: the run succeeded.
        joined = await client.get(f"/threads/{thread}/runs/{copy.id}/join")
        assert joined.status_code == 200 and "__error__" not in body(joined), joined.content
        stream = Stream(app, "GET", f"/langgraph/threads/{thread}/runs/{copy.id}/stream", key=key)
        protocol = await stream_events(stream)
        assert names(protocol)[0] == "metadata" and names(protocol)[-1] == "end", protocol


async def test_a_forked_sessions_turns_report_their_outcome(app, api, script):
    originals = [body(await api.chat("s1", text)) for text in ("hello", "Ada Lovelace", "ada@example.com")]
    forked = await api.call("POST", "/sessions/s1/fork", {"turn_id": originals[1]["turn_id"], "new_key": "s1-b"})
    assert forked.status_code == 201, forked.content
    await assert_copies_report_their_outcome(app, api.key, "s1-b", originals[:2])


async def test_a_copied_threads_runs_report_their_outcome(app, api, script):
    originals = [body(await api.chat("t1", text)) for text in ("hello", "Ada Lovelace")]
    client = Protocol(api.key)
    copied = await client.post("/threads/t1/copy")
    assert copied.status_code == 200, copied.content
    await assert_copies_report_their_outcome(app, api.key, body(copied)["thread_id"], originals)
    # The source's own runs are untouched.
    (first, *_) = await orm(turns_of, key="t1")
    events = await stream_events(reattach(app, api.key, "t1", first.id))
    assert events[-1].event == "done" and events[-1].json["turn_id"] == str(first.id)
