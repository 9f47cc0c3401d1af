"""The SSE consumers through `build_application()` with Channels'
`HttpCommunicator`: every event sequence of the stream, the errors answered
before it starts, disconnects under both settings, and re-attach."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from channels.testing import HttpCommunicator

from agentsite.routing import build_application
from core.http import sse
from sessions_app.models import AgentSession
from tests.api.test_bad_input import BAD_CHAT_BODIES, BAD_IDEMPOTENCY_KEYS
from tests.fixtures.runners import orm
from tests.fixtures.turns import claim_turn
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

STEP = 10  # seconds any single message may take; a hang fails instead of blocking


@pytest.fixture(scope="module")
def app():
    return build_application()


@dataclass
class Event:
    id: int
    event: str
    data: str

    @property
    def json(self) -> Any:
        return json.loads(self.data)


class Stream:
    """One request to a consumer, read message by message."""

    def __init__(
        self,
        app,
        method: str,
        path: str,
        *,
        key: str | None,
        body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        # As every HTTP/1.1 client sends it; the edge checks it as Django does.
        sent = {"Host": "testserver", **(headers or {})}
        if key is not None:
            sent["Authorization"] = f"Bearer {key}"
        payload = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        self.comm = HttpCommunicator(
            app,
            method,
            path,
            payload,
            headers=[(k.lower().encode(), v.encode("latin-1")) for k, v in sent.items()],
        )
        self.payload = payload
        self.buffer = b""
        self.chunks: list[bytes] = []
        self.ended = False

    async def start(self) -> dict[str, Any]:
        await self.comm.send_input({"type": "http.request", "body": self.payload})
        start = await self.comm.receive_output(STEP)
        assert start["type"] == "http.response.start"
        self.status = start["status"]
        self.headers = {k.decode(): v.decode() for k, v in start.get("headers", [])}
        return start

    async def _chunk(self) -> None:
        message = await self.comm.receive_output(STEP)
        assert message["type"] == "http.response.body"
        self.chunks.append(message["body"])
        self.buffer += message["body"]
        self.ended = not message.get("more_body", False)

    async def next_event(self) -> Event | None:
        """The next event (comments skipped), or None at the end of the body."""
        while True:
            while b"\n\n" not in self.buffer:
                if self.ended:
                    assert self.buffer == b"", self.buffer
                    return None
                await self._chunk()
            block, self.buffer = self.buffer.split(b"\n\n", 1)
            lines = [line for line in block.decode().split("\n") if not line.startswith(":")]
            fields = dict(line.split(": ", 1) for line in lines)
            if fields:
                return Event(int(fields["id"]), fields["event"], fields["data"])

    async def events(self) -> list[Event]:
        out = []
        while (event := await self.next_event()) is not None:
            out.append(event)
        await self.comm.wait(STEP)
        return out

    async def body(self) -> bytes:
        while not self.ended:
            await self._chunk()
        await self.comm.wait(STEP)
        return self.buffer

    async def disconnect(self) -> None:
        await self.comm.send_input({"type": "http.disconnect"})
        await self.comm.wait(STEP)


def post(
    app,
    key: str | None,
    session: str,
    text: str = "Ada Lovelace",
    *,
    idem: str | None = None,
    headers: dict[str, str] | None = None,
) -> Stream:
    headers = {**({"Idempotency-Key": idem} if idem is not None else {}), **(headers or {})}
    path = f"/api/sessions/{session}/turns/stream"
    return Stream(app, "POST", path, key=key, body={"text": text}, headers=headers)


def reattach(app, key: str | None, session: str, turn_id, last: int | str | None = None) -> Stream:
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    path = f"/api/sessions/{session}/turns/{turn_id}/stream"
    return Stream(app, "GET", path, key=key, headers=headers)


async def stream_events(stream: Stream) -> list[Event]:
    await stream.start()
    assert stream.status == 200, stream.buffer
    return await stream.events()


async def json_error(stream: Stream, status: int, code: str) -> dict[str, Any]:
    await stream.start()
    body = json.loads(await stream.body())
    assert stream.status == status, body
    assert stream.headers["content-type"] == "application/json; charset=utf-8"
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return body


def names(events: list[Event]) -> list[str]:
    return [e.event for e in events]


def turn_row(turn_id) -> AgentTurn:
    return AgentTurn.objects.get(pk=turn_id)


def session_row(key: str = "s1") -> AgentSession:
    return AgentSession.objects.get(key=key)


def all_turns() -> list[AgentTurn]:
    return list(AgentTurn.objects.order_by("created_at"))


async def wait_for(predicate, timeout: float = STEP) -> None:
    deadline = time.monotonic() + timeout
    while not await orm(predicate):
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


@pytest.fixture
def gate(script):
    """Holds every reply after its first token until set; always opened at
    teardown so no model call is left hanging."""
    script.gate = threading.Event()
    script.reply_started.clear()
    yield script.gate
    script.gate.set()


async def until_first_delta(stream: Stream) -> list[Event]:
    await stream.start()
    seen: list[Event] = []
    while not seen or seen[-1].event != "delta":
        event = await stream.next_event()
        assert event is not None and event.event != "error", seen
        seen.append(event)
    return seen


# --- fresh turn ---------------------------------------------------------------------


async def test_fresh_turn_streams_turn_deltas_fields_done(app, alice, script):
    stream = post(app, alice, "s1")
    events = await stream_events(stream)
    assert stream.headers["content-type"] == "text/event-stream"
    assert stream.headers["cache-control"] == "no-cache"
    assert stream.headers["x-accel-buffering"] == "no"

    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[0].event == "turn" and events[-1].event == "done"
    assert set(names(events[1:-1])) == {"fields", "delta"}
    assert names(events).count("done") == 1 and "error" not in names(events)
    turn = events[0].json
    done = events[-1].json
    row = await orm(turn_row, turn_id=turn["turn_id"])
    assert row.status == "committed"
    assert events[-1].data == row.result  # the stored body, byte for byte
    assert (turn["epoch"], turn["number"], turn["base_version"]) == (row.epoch, row.number, 0)
    assert done["version"] == 1 and done["turn_id"] == turn["turn_id"]
    assert "".join(e.json["text"] for e in events if e.event == "delta") == done["reply"]
    assert (await orm(session_row)).version == 1


async def test_json_api_still_served_behind_the_consumers(app, alice):
    stream = Stream(app, "GET", "/api/sessions", key=alice, headers={"Host": "localhost"})
    response = await stream.start()
    assert response["status"] == 200


# --- replay ---------------------------------------------------------------------------


async def test_replay_streams_the_stored_result_without_a_model_call(app, api, script):
    first = await api.chat("s1", "Ada Lovelace", idem="k-1")
    assert first.status_code == 200
    calls = script.count()
    stream = post(app, api.key, "s1", idem="k-1")
    events = await stream_events(stream)
    assert script.count() == calls
    assert stream.headers["idempotent-replayed"] == "true"
    # The turn's logged stream, ids as they were. A JSON turn streams no
    # tokens: turn, fields, done.
    assert names(events) == ["turn", "fields", "done"]
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    # The JSON endpoint's body, byte for byte.
    assert events[-1].data.encode() == first.content
    body = json.loads(first.content)
    assert events[1].json["field_changes"] == body["field_changes"]
    assert events[0].json["turn_id"] == body["turn_id"]
    assert (await orm(session_row)).version == 1


async def test_replay_matches_the_live_stream_it_replays(app, alice, script):
    live = await stream_events(post(app, alice, "s1", idem="k-1"))
    replay = await stream_events(post(app, alice, "s1", idem="k-1"))
    assert replay == live


# --- errors before the stream: plain JSON ---------------------------------------------


async def test_idempotency_conflict_is_a_plain_409(app, api, script):
    await api.chat("s1", "Ada Lovelace", idem="k-1")
    conflicting = post(app, api.key, "s1", "someone else", idem="k-1")
    await json_error(conflicting, 409, "idempotency_conflict")
    assert len(await orm(all_turns)) == 1


async def test_same_key_while_running_is_a_plain_409(app, alice, gate, script):
    running = post(app, alice, "s1", idem="k-1")
    await until_first_delta(running)
    await json_error(post(app, alice, "s1", idem="k-1"), 409, "turn_in_progress")
    gate.set()
    assert (await running.events())[-1].event == "done"


async def test_busy_session_is_a_plain_409(app, alice, gate, script, settings):
    settings.AGENT_SESSION_WAIT_SECONDS = 0
    running = post(app, alice, "s1")
    await until_first_delta(running)
    await json_error(post(app, alice, "s1", "ada@example.com"), 409, "session_busy")
    gate.set()
    assert (await running.events())[-1].event == "done"


HI = '{"text": "hi"}'
RAW_BODIES = {
    "truncated": '{"text": "hi"',
    "not_json": "not json",
    "string": '"hi"',
    "list": "[1]",
    "null": "null",
    "blank": " ",
    "empty": "",
}
# name: (session key as sent in the URL, raw body, headers)
BAD_REQUESTS = {
    **{f"body_{name}": ("s1", json.dumps(body), {}) for name, body in BAD_CHAT_BODIES.items()},
    **{f"raw_{name}": ("s1", raw, {}) for name, raw in RAW_BODIES.items()},
    **{f"idem_{name}": ("s1", HI, {"Idempotency-Key": idem}) for name, idem in BAD_IDEMPOTENCY_KEYS.items()},
    "bad_key": ("a%3Fb", HI, {}),
    "bad_key_and_body": ("a%3Fb", "{", {}),
    "bad_body_and_idem": ("s1", '{"text": ""}', {"Idempotency-Key": ""}),
    "nul_in_text": ("s1", '{"text": "a\\u0000b"}', {}),
    "nul_in_mode": ("s1", '{"text": "hi", "client_mode": "\\u0000"}', {}),
    "nul_in_unknown_key": ("s1", '{"text": "hi", "x\\u0000": 1}', {}),
}


async def bad_stream_request(app, key: str, session: str, raw: str, headers) -> tuple[int, dict]:
    # Percent-encoded as a client sends it; the scope's path is decoded.
    path = f"/api/sessions/{session}/turns/stream"
    stream = Stream(app, "POST", path, key=key, raw=raw.encode(), headers=headers)
    await stream.start()
    body = json.loads(await stream.body())
    assert stream.headers["content-type"] == "application/json; charset=utf-8"
    return stream.status, body


@pytest.mark.parametrize("case", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
async def test_bad_input_answers_as_the_json_endpoint_does(app, api, script, case):
    """Same parsing and checks, in the same order: the stream's plain JSON
    error is the JSON endpoint's, and nothing is written."""
    session, raw, headers = case
    status, body = await bad_stream_request(app, api.key, session, raw, headers)
    assert status in (400, 422), body
    reference = await api.call("POST", f"/sessions/{session}/turns", headers=headers, raw=raw)
    assert (status, body) == (reference.status_code, json.loads(reference.content))
    assert script.count() == 0
    assert await orm(all_turns) == []


async def test_slash_in_session_key_is_a_plain_422(app, api, script):
    status, body = await bad_stream_request(app, api.key, "a%2Fb", HI, {})
    assert (status, body["error"]["code"]) == (422, "invalid_session_key")
    assert script.count() == 0


@pytest.mark.parametrize(
    "header",
    [None, "Bearer nope", "Basic abc", "Bearer "],
    ids=["none", "unknown", "basic", "empty"],
)
async def test_bad_auth_is_a_plain_401(app, alice, script, header):
    headers = {"Authorization": header} if header else {}
    await json_error(post(app, None, "s1", headers=headers), 401, "unauthorized")
    assert script.count() == 0


async def test_wrong_method_is_a_plain_405(app, alice):
    stream = Stream(app, "GET", "/api/sessions/s1/turns/stream", key=alice)
    await json_error(stream, 405, "method_not_allowed")
    assert stream.headers["allow"] == "POST"


# --- failures after the stream started: an error event, never done -------------------


async def test_model_error_ends_with_an_error_event(app, alice, script):
    script.fail["reply"] = RuntimeError("provider exploded")
    events = await stream_events(post(app, alice, "s1"))
    assert events[0].event == "turn" and names(events)[-1] == "error"
    assert "done" not in names(events)
    assert events[-1].json["code"] == "model_error"
    # The error goes out first; the abort follows (it may wait on the database).
    turn_id = events[0].json["turn_id"]
    await wait_for(lambda: turn_row(turn_id).status == "aborted")
    row = await orm(turn_row, turn_id=turn_id)
    assert row.error["code"] == "model_error"
    assert (await orm(session_row)).active_turn_id is None


async def test_stale_commit_ends_with_an_error_event(app, api, gate, script):
    stream = post(app, api.key, "s1")
    seen = await until_first_delta(stream)
    assert (await api.call("DELETE", "/sessions/s1")).status_code == 204
    gate.set()
    events = seen + await stream.events()
    assert names(events)[-1] == "error" and "done" not in names(events)
    assert events[-1].json["code"] == "stale_turn"
    assert await orm(all_turns) == []  # deleted with the session; nothing committed
    assert (await orm(session_row)).version == 0


async def test_a_run_that_dies_without_an_outcome_still_ends_with_an_error(app, alice, script, monkeypatch):
    """The runner emits `error` for the failures it knows; a bug (here in
    the commit) must not leave the stream ending without either outcome."""
    from turns_app import execution

    def broken_commit(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(execution, "turn_commit", broken_commit)
    events = await stream_events(post(app, alice, "s1"))
    assert names(events)[-1] == "error" and "done" not in names(events)
    assert events[-1].json["code"] == "internal_error"
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert (await orm(session_row)).version == 0


async def test_keepalive_comments_while_the_model_is_silent(app, alice, gate, script, monkeypatch):
    monkeypatch.setattr(sse, "KEEPALIVE_SECONDS", 0.05)
    stream = post(app, alice, "s1")
    first = await until_first_delta(stream)
    await asyncio.sleep(0.3)
    gate.set()
    events = first + await stream.events()
    assert sse.KEEPALIVE in stream.chunks
    assert events[-1].event == "done"
    # A third-party client sees the same events and nothing else: httpx-sse
    # turns a comment followed by a blank line into an empty event.
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    lines, decoder = SSELineDecoder(), SSEDecoder()
    seen = [
        e.event
        for chunk in stream.chunks
        for line in lines.decode(chunk.decode())
        if (e := decoder.decode(line)) is not None
    ]
    assert seen == [e.event for e in events]


# --- client disconnect -----------------------------------------------------------------


async def test_disconnect_with_continue_commits_the_turn(app, alice, gate, script, settings):
    settings.AGENT_ON_DISCONNECT = "continue"
    stream = post(app, alice, "s1", idem="k-1")
    seen = await until_first_delta(stream)
    await stream.disconnect()
    turn_id = seen[0].json["turn_id"]
    assert (await orm(turn_row, turn_id=turn_id)).status == "pending"
    gate.set()
    await wait_for(lambda: turn_row(turn_id).status == "committed")
    # A retry with the same key replays the committed turn.
    calls = script.count()
    events = await stream_events(post(app, alice, "s1", idem="k-1"))
    assert script.count() == calls
    assert names(events)[:2] == ["turn", "fields"] and names(events)[-1] == "done"
    assert events[-1].json["turn_id"] == turn_id and events[-1].json["version"] == 1


async def test_disconnect_with_cancel_aborts_the_turn_at_once(app, alice, gate, script, settings):
    settings.AGENT_ON_DISCONNECT = "cancel"
    stream = post(app, alice, "s1")
    seen = await until_first_delta(stream)
    await stream.disconnect()  # returns once the consumer finished
    row = await orm(turn_row, turn_id=seen[0].json["turn_id"])
    assert row.status == "aborted" and row.error["code"] == "turn_cancelled"
    session = await orm(session_row)
    assert session.active_turn_id is None and session.version == 0
    # The session is free: the next turn runs without waiting for a lease.
    gate.set()
    settings.AGENT_SESSION_WAIT_SECONDS = 0
    events = await stream_events(post(app, alice, "s1"))
    assert events[-1].event == "done" and events[-1].json["version"] == 1


# --- re-attach ----------------------------------------------------------------------------


async def test_reattach_follows_a_running_turn_from_last_event_id(app, alice, gate, script):
    first = post(app, alice, "s1")
    seen = await until_first_delta(first)  # turn, fields, delta
    turn_id = seen[0].json["turn_id"]
    follower = reattach(app, alice, "s1", turn_id, last=seen[-2].id)
    await follower.start()
    assert follower.status == 200
    assert await follower.next_event() == seen[-1]  # missed events first...
    gate.set()
    rest = await first.events()
    assert await follower.events() == rest
    assert rest[-1].event == "done"


async def test_reattach_to_a_just_finished_turn_keeps_the_live_ids(app, alice, script):
    live = await stream_events(post(app, alice, "s1"))
    assert len(live) > 4, "the test needs several deltas"
    turn_id = live[0].json["turn_id"]
    assert await stream_events(reattach(app, alice, "s1", turn_id, last=3)) == live[3:]
    # Past the end: nothing left, and 204 tells an EventSource to stop.
    stream = reattach(app, alice, "s1", turn_id, last=live[-1].id)
    assert (await stream.start())["status"] == 204


async def test_reattach_replays_a_committed_turn_from_the_log(app, api, script):
    body = json.loads((await api.chat("s1", "Ada Lovelace")).content)
    turn_id = body["turn_id"]
    full = await stream_events(reattach(app, api.key, "s1", turn_id))
    assert names(full) == ["turn", "fields", "done"]  # a JSON turn streams no tokens
    assert [e.id for e in full] == list(range(1, len(full) + 1))
    assert json.loads(full[-1].data) == body
    assert await stream_events(reattach(app, api.key, "s1", turn_id, last=2)) == full[2:]
    # The final event's id: nothing left (204 stops an EventSource).
    stream = reattach(app, api.key, "s1", turn_id, last=full[-1].id)
    assert (await stream.start())["status"] == 204
    # An id past the final one (events a dead process showed and never
    # wrote): the client has not seen the outcome, and gets it.
    assert await stream_events(reattach(app, api.key, "s1", turn_id, last=full[-1].id + 5)) == full[-1:]


async def test_reattach_to_an_aborted_turn_ends_in_its_error(app, api, script):
    script.fail["reply"] = RuntimeError("boom")
    assert (await api.chat("s1", "Ada Lovelace")).status_code == 502
    (row,) = await orm(all_turns)
    events = await stream_events(reattach(app, api.key, "s1", row.id))
    assert names(events) == ["turn", "fields", "error"]
    assert events[-1].json == row.error and row.error["code"] == "model_error"


async def test_reattach_follows_a_turn_running_elsewhere_from_the_log(app, api, script):
    """A turn claimed by another process (here: claimed directly, with no
    run in this process): the follower reads the log and is woken when the
    other process writes, up to the final event."""
    from turns_app.services import turn_abort
    from turns_app.services.event_rows import OUTSIDE_FINAL_SEQ

    claim = await claim_turn("s1", "x")
    follower = reattach(app, api.key, "s1", claim.turn_id)
    await follower.start()
    assert follower.status == 200
    first = await follower.next_event()
    assert (first.id, first.event) == (1, "turn")
    await orm(turn_abort, turn_id=claim.turn_id, code="model_error", message="elsewhere")
    rest = await follower.events()
    # Written without the run's ids: past any of them.
    assert [(e.id, e.event) for e in rest] == [(OUTSIDE_FINAL_SEQ, "error")]
    assert rest[0].json == {"code": "model_error", "message": "elsewhere"}


async def test_only_a_turn_still_running_is_subscribed_to(app, api, script, monkeypatch):
    """Replaying a finished turn's log waits on nothing: no subscription, so
    on PostgreSQL no follower registered and removed (two writes) per replay."""
    from turns_app import wakeups
    from turns_app.services import turn_abort

    subscribed = []
    real = wakeups.subscription

    def counted(turn_id, **kwargs):
        subscribed.append(turn_id)
        return real(turn_id, **kwargs)

    monkeypatch.setattr(wakeups, "subscription", counted)
    body = json.loads((await api.chat("s1", "Ada Lovelace", idem="k-1")).content)
    assert names(await stream_events(reattach(app, api.key, "s1", body["turn_id"])))[-1] == "done"
    assert names(await stream_events(post(app, api.key, "s1", idem="k-1")))[-1] == "done"
    assert subscribed == []

    claim = await claim_turn("s2", "x")
    follower = reattach(app, api.key, "s2", claim.turn_id)
    await follower.start()
    assert (await follower.next_event()).event == "turn"
    await orm(turn_abort, turn_id=claim.turn_id, code="model_error", message="elsewhere")
    assert [e.event for e in await follower.events()] == ["error"]
    assert subscribed == [claim.turn_id]


async def test_a_follower_ends_a_turn_whose_process_died(app, api, script, settings, monkeypatch):
    """Nobody renews the lease of a turn whose process died: a follower
    aborts it once the lease ran out and gets `lease_expired`."""
    from turns_app import events

    monkeypatch.setattr(events, "RECHECK_SECONDS", 0.1)
    settings.AGENT_TURN_LEASE_SECONDS = 0.5
    claim = await claim_turn("s1", "x")
    started = time.monotonic()
    events_seen = await stream_events(reattach(app, api.key, "s1", claim.turn_id))
    assert time.monotonic() - started < 3
    assert names(events_seen) == ["turn", "error"]
    assert events_seen[-1].json["code"] == "lease_expired"
    assert (await orm(turn_row, turn_id=claim.turn_id)).status == "aborted"


async def test_reattach_checks_owner_and_turn(app, api, bob, script):
    body = json.loads((await api.chat("s1", "Ada Lovelace")).content)
    await json_error(reattach(app, bob, "s1", body["turn_id"]), 404, "session_not_found")
    await json_error(reattach(app, api.key, "s1", uuid.uuid4()), 404, "turn_not_found")
    await json_error(reattach(app, api.key, "s1", "not-a-uuid"), 404, "turn_not_found")
    await json_error(reattach(app, api.key, "nope", body["turn_id"]), 404, "session_not_found")
    await json_error(reattach(app, None, "s1", body["turn_id"]), 401, "unauthorized")
    bad_id = reattach(app, api.key, "s1", body["turn_id"], last="x")
    await json_error(bad_id, 422, "validation_error")


async def test_oversized_body_is_a_plain_413_and_nothing_is_written(app, alice, script, settings):
    """Django's DATA_UPLOAD_MAX_MEMORY_SIZE does not reach a consumer; the
    stream applies the same cap before buffering more."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    stream = Stream(
        app, "POST", "/api/sessions/s1/turns/stream", key=alice, raw=json.dumps({"text": "x" * 2000}).encode()
    )
    await json_error(stream, 413, "payload_too_large")
    assert script.count() == 0
    assert await orm(all_turns) == []
