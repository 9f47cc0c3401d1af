"""Many cancels racing a fast-streaming run, against a real daphne process,
on both databases: the cancel's `error` is written while the run's own
event batches are in flight (docs/turn-protocol.md, "Cancel"). Whatever
wins, every stream of the run — the live one, a join from any id it
showed, the /api/ re-attach — ends with exactly one final event and a
complete body, and join and cancel?wait=1 answer the run's outcome, never
404."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from httpx_sse import aconnect_sse

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

ROUNDS = 24
# Tokens 10 ms apart: a run streams for a few of the event log's 50 ms
# batches, so cancels land while batches are being written.
TOKEN_DELAY_MS = "10"
TEST_SECONDS = 300
PROTOCOL_FINAL = {"end", "error"}
API_FINAL = {"done", "error"}


def headers(key: str, last: int | None = None) -> dict[str, str]:
    sent = {"x-api-key": key, "Authorization": f"Bearer {key}"}
    if last is not None:
        sent["Last-Event-ID"] = str(last)
    return sent


async def read_stream(client, method: str, path: str, key: str, *, last=None, body=None, on_event=None):
    """(status, [(id, event, data)]) of one SSE request read to its end; a
    body cut short raises (httpx: incomplete chunked read)."""
    events = []
    kwargs = {"json": body} if body is not None else {}
    async with aconnect_sse(client, method, path, headers=headers(key, last), **kwargs) as source:
        if source.response.status_code != 200:
            await source.response.aread()
            return source.response.status_code, []
        async for sse in source.aiter_sse():
            events.append((int(sse.id), sse.event, sse.data))
            if on_event is not None:
                on_event(len(events), sse)
    return 200, events


def ends_once(events, finals: set[str]) -> str:
    """The one final event's name: it is the last, and the only one."""
    names = [event for _, event, _ in events]
    assert names and names[-1] in finals and sum(n in finals for n in names) == 1, events
    ids = [i for i, _, _ in events]
    assert ids == sorted(set(ids)), ids
    return names[-1]


async def one_round(client, key: str, round_no: int) -> str:
    thread = await client.post("/langgraph/threads", json={}, headers=headers(key))
    assert thread.status_code == 200, thread.text
    tid = thread.json()["thread_id"]
    run_id: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    cancel_now = asyncio.Event()
    # Cancel after the k-th event the live client read: spread over the run.
    cancel_after = 1 + round_no % 8

    def on_event(count: int, sse) -> None:
        if sse.event == "metadata" and not run_id.done():
            run_id.set_result(json.loads(sse.data)["run_id"])
        if count >= cancel_after:
            cancel_now.set()

    body = {
        "assistant_id": "intake",
        "input": {"messages": [{"role": "user", "content": f"Hello, round {round_no}"}]},
        "stream_mode": ["messages-tuple", "values"],
    }
    live = asyncio.ensure_future(
        read_stream(client, "POST", f"/langgraph/threads/{tid}/runs/stream", key, body=body, on_event=on_event)
    )
    rid = await run_id
    waiting = asyncio.ensure_future(cancel_now.wait())
    await asyncio.wait({live, waiting}, return_when="FIRST_COMPLETED")
    waiting.cancel()
    cancel = f"/langgraph/threads/{tid}/runs/{rid}/cancel"
    answers = await asyncio.gather(
        client.post(cancel, headers=headers(key)),
        client.post(cancel, headers=headers(key)),
        client.post(f"{cancel}?wait=1", headers=headers(key)),
    )
    status, events = await live  # raises if the body was cut
    assert status == 200
    final = ends_once(events, PROTOCOL_FINAL)
    for answer in answers:
        # Accepted (or the run ended first, cancelled already): never "no such run".
        assert answer.status_code in (202, 204), (answer.status_code, answer.text)
    assert answers[-1].status_code == 204  # wait=1: once the run's final event is written

    joined = await client.get(f"/langgraph/threads/{tid}/runs/{rid}/join", headers=headers(key))
    assert joined.status_code == 200, joined.text
    assert ("__error__" in joined.json()) == (final == "error"), (joined.json(), events)
    if final == "error":
        assert joined.json()["__error__"]["error"] == "turn_cancelled", joined.text

    # Resumed from the start and from every id the live client was shown.
    join = f"/langgraph/threads/{tid}/runs/{rid}/stream"
    for last in [None, *(i for i, _, _ in events[:-1])]:
        status, resumed = await read_stream(client, "GET", join, key, last=last)
        assert status == 200
        assert ends_once(resumed, PROTOCOL_FINAL) == final, (last, resumed)
        assert all(i > (last or 0) for i, _, _ in resumed), (last, resumed)
        status, reattached = await read_stream(client, "GET", f"/api/sessions/{tid}/turns/{rid}/stream", key, last=last)
        assert status == 200, (last, status)
        assert ends_once(reattached, API_FINAL) == ("done" if final == "end" else "error"), (last, reattached)
    # Holding the final event's id, there is nothing more.
    status, _ = await read_stream(client, "GET", f"/api/sessions/{tid}/turns/{rid}/stream", key, last=events[-1][0])
    assert status == 204
    return final


async def test_many_cancels_racing_a_streaming_run(servers, alice):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS=TOKEN_DELAY_MS)
    async with (
        asyncio.timeout(TEST_SECONDS),
        httpx.AsyncClient(base_url=server.url, timeout=60) as client,
    ):
        outcomes = [await one_round(client, alice, n) for n in range(ROUNDS)]
    # The race was run, not won by one side every time.
    assert "error" in outcomes, outcomes
