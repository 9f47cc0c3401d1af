"""`GET /threads/{thread_id}/stream`: join the thread's stream, as
LangGraph's server serves it (docs/agent-protocol.md, "Thread streams"):
every run of the thread in turn, for as long as the client stays.

* `run_modes` (the default): each run's own stream, as `/runs/stream`
  sends it for the stream modes the run was started with (`metadata`
  first, then its modes' events, `error` if it failed), and at its end
  `metadata` `{"status": "run_done", "run_id"}`;
* `lifecycle`: only those two `metadata` events of each run;
* `state_update`: `state_update` `{"state": ThreadState, "thread_id"}` for
  each state update (`POST /threads/{id}/state`, a turn of its own).

The ids are the thread stream's `seq` (thread_events.seq_of), the same on
every process, so `Last-Event-ID` resumes from the durable log anywhere.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any
from uuid import UUID

from core.asyncdb import db
from core.errors import ValidationFailed
from core.http.errors import run_error
from langgraph_app import threads
from langgraph_app.stream import ProtocolEvent, Wire, already_sent, close, replays_whole
from langgraph_app.thread_events import SEQ_MAX, seq_of, thread_turns
from turns_app import selectors
from turns_app.events import replay_from
from turns_app.native_json import dumps

MODES = frozenset({"lifecycle", "run_modes", "state_update"})
MAX_MODES = 8


def parse_modes(query: dict[str, list[str]]) -> frozenset[str]:
    """`stream_modes` as LangGraph's server reads it (comma-separated), or
    `stream_mode` as the Python SDK sends it (repeated); `run_modes` if none."""
    raw = [*query.get("stream_modes", []), *query.get("stream_mode", [])]
    modes = [m.strip() for value in raw for m in value.split(",") if m.strip()]
    if len(modes) > MAX_MODES:
        raise ValidationFailed(f"at most {MAX_MODES} stream modes")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValidationFailed(f"Invalid stream mode: {unknown[0][:40]!r} (lifecycle, run_modes, state_update)")
    return frozenset(modes) or frozenset({"run_modes"})


def parse_since(raw: str | None) -> int | None:
    """None: from the newest run's start; `-` (or -1): from the thread's
    first run; else an id this stream sent."""
    raw = (raw or "").strip()
    if not raw:
        return None
    if raw in ("-", "-1"):
        return 0
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 16 and int(raw) <= SEQ_MAX):
        raise ValidationFailed("Last-Event-ID must be an id this thread stream sent, or '-'")
    return int(raw)


async def join_thread(
    *, owner: str, key: str, modes: frozenset[str], since: int | None
) -> AsyncGenerator[ProtocolEvent, None]:
    async for turn_id, number, after in thread_turns(owner=owner, key=key, since=since):
        turn = await db(selectors.turn_of_owner, owner=owner, key=key, turn_id=turn_id)
        request = turn.request or {}
        events = _turn(owner, key, turn_id, number, after, request, modes)
        try:
            async for event in events:
                if since is None or event.id > since:
                    yield event
        finally:
            await close(events)


async def _turn(
    owner: str, key: str, turn_id: UUID, number: int, after: int, request: dict[str, Any], modes: frozenset[str]
) -> AsyncGenerator[ProtocolEvent, None]:
    is_update = "state" in request
    runs = "run_modes" in modes
    lifecycle = runs or "lifecycle" in modes
    run_modes = (request.get("protocol") or {}).get("stream_mode") or ["values"]
    wire = Wire(run_modes)
    run_done = dumps({"status": "run_done", "run_id": str(turn_id)})
    # A partial past `after` is the message so far: the chunks before it are read too.
    whole = runs and after > 0 and replays_whole(run_modes)
    events = replay_from(turn_id, 0 if whole else after)
    try:
        async for event in events:
            if whole and already_sent(event, after):
                wire.read(event)
                continue
            if is_update:
                if event.event == "done" and "state_update" in modes:
                    state = await db(threads.state_after_turn, owner=owner, key=key, turn_id=turn_id)
                    data = dumps({"state": state, "thread_id": key})
                    yield ProtocolEvent(seq_of(number, event.id), "state_update", data)
                continue
            if event.event == "turn" and lifecycle:
                data = dumps({"run_id": str(turn_id), "attempt": 1})
                yield ProtocolEvent(seq_of(number, event.id), "metadata", data)
            elif runs and (out := wire.sent(event)) is not None:
                yield ProtocolEvent(seq_of(number, event.id), *out)
            elif event.event == "error":
                if runs:
                    told: Any = json.loads(event.data)
                    told = told if isinstance(told, dict) else {}
                    failed = dumps(run_error(told.get("code"), told.get("message")))
                    yield ProtocolEvent(seq_of(number, event.id), "error", failed)
                if lifecycle:
                    yield ProtocolEvent(seq_of(number, event.id, 1), "metadata", run_done)
            elif event.event == "done" and lifecycle:
                yield ProtocolEvent(seq_of(number, event.id), "metadata", run_done)
    finally:
        await close(events)
