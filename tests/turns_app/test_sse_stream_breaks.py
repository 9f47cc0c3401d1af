"""A stream that breaks after its response started — here the event log's
database goes away under a re-attached follower — ends with an `error`
event and a clean end of the response, never a cut chunked body, in both
dialects (docs/api.md, "Re-attach"; docs/agent-protocol.md, "Streams and
errors")."""

from __future__ import annotations

import json

import pytest
from django.db import OperationalError

from tests.fixtures.turns import claim_turn
from tests.turns_app.test_sse_consumer import STEP, Stream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def app():
    from agentsite.routing import build_application

    return build_application()


@pytest.fixture
def log_breaks_after_first_read(monkeypatch):
    """The follower's first read of the log works; every later one fails
    as a lost database does."""
    from turns_app import events

    real, reads = events.turn_events_after, []

    def read(**kwargs):
        reads.append(kwargs)
        if len(reads) > 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(**kwargs)

    monkeypatch.setattr(events, "turn_events_after", read)
    return reads


async def whole_body(stream: Stream) -> list[dict[str, str]]:
    """Every block of the body, read to a clean end (more_body false)."""
    await stream.start()
    assert stream.status == 200
    while not stream.ended:
        await stream._chunk()
    await stream.comm.wait(STEP)
    blocks = [block for block in stream.buffer.decode().split("\n\n") if block.strip()]
    parsed = []
    for block in blocks:
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines:
            parsed.append(dict(line.split(": ", 1) for line in lines))
    return parsed


async def test_a_reattach_whose_log_breaks_ends_with_an_error(app, api, log_breaks_after_first_read):
    claim = await claim_turn("s1", "hello")
    stream = Stream(app, "GET", f"/api/sessions/s1/turns/{claim.turn_id}/stream", key=api.key)
    blocks = await whole_body(stream)
    assert [b["event"] for b in blocks] == ["turn", "error"], blocks
    assert json.loads(blocks[-1]["data"])["code"] == "storage_unavailable"
    # No id: a client resuming goes on after the last event it really got.
    assert "id" not in blocks[-1] and blocks[0]["id"] == "1"
    assert len(log_breaks_after_first_read) >= 2


async def test_a_joined_run_whose_log_breaks_ends_with_an_error(app, api, log_breaks_after_first_read):
    claim = await claim_turn("s1", "hello")
    stream = Stream(app, "GET", f"/langgraph/threads/s1/runs/{claim.turn_id}/stream", key=api.key)
    blocks = await whole_body(stream)
    assert [b["event"] for b in blocks] == ["metadata", "error"], blocks
    assert json.loads(blocks[-1]["data"])["error"] == "storage_unavailable"
    assert "id" not in blocks[-1]
