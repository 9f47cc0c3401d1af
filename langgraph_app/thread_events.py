"""LangGraph's thread-stream protocol, its events: a thread's runs (turns)
as protocol events `{"type": "event", "method", "params": {"namespace",
"timestamp", "data", "node"?}, "event_id", "seq"}`, read from the durable
turn event log, so any process serves them and a client resumes with
`since` without gap or duplicate (docs/agent-protocol.md, "Thread streams").

* `seq` is made of the turn's number in its epoch and the event's id in the
  turn's log: number × 2³² + event id × 2⁸ + k, where k numbers the events
  one log event stands for (a paused turn's `done` is one `input.requested`
  per interrupt, then `lifecycle` `interrupted`). It rises strictly across
  the thread's runs of an epoch and is the same on every process.
* `event_id` is `<turn id>:<event id>[:<k>]`: unique and stable.
* The root's lifecycle comes from the turn's own events: its first event
  (`running`), its `done` (`completed`, or `interrupted` with the
  interrupts on `input`) and its `error` (`failed`). Everything else is the
  run's v3 protocol events as the graph step logged them
  (turns_app.thread_stream_parts).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from core.asyncdb import db
from core.errors import SessionNotFound, ValidationFailed
from langgraph_app.stream import ProtocolEvent, close
from turns_app.events import replay_from
from turns_app.selectors import interrupt_namespaces, turn_numbers_from
from turns_app.types import TurnEvent

SEQ_PER_TURN = 2**32
SEQ_PER_EVENT = 2**8
SEQ_MAX = 2**53 - 1  # what a JavaScript client holds exactly
CHANNELS = frozenset({"values", "updates", "messages", "tools", "custom", "lifecycle", "input", "tasks", "checkpoints"})
MAX_CHANNELS = 32
MAX_NAMESPACES = 32
MAX_SEGMENTS = 32
MAX_SEGMENT_LENGTH = 256
MAX_DEPTH = 64
# How often an idle thread stream looks for the thread's next run.
NEXT_RUN_POLL_SECONDS = 0.5
# Stored events longer than this are parsed on a thread, not on the loop.
PARSE_ON_LOOP_MAX = 64 * 1024
PROTOCOL_EVENT = "protocol"  # turns_app.thread_stream_parts.PROTOCOL_EVENT


class BadStreamRequest(ValidationFailed):
    """LangGraph's server answers a bad subscription 400."""

    status = 400


@dataclass(frozen=True)
class Subscription:
    channels: frozenset[str]
    namespaces: tuple[tuple[str, ...], ...] | None
    depth: int | None
    since: int | None


def _is_channel(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    if value.startswith("custom:"):
        return 0 < len(value) - len("custom:") <= MAX_SEGMENT_LENGTH
    return value in CHANNELS


def parse_subscription(raw: Any) -> Subscription:
    """The body of `POST /threads/{id}/stream/events`, bounded."""
    if not isinstance(raw, dict):
        raise BadStreamRequest("the body must be an object with channels")
    channels = raw.get("channels")
    if not isinstance(channels, list) or not channels or len(channels) > MAX_CHANNELS:
        raise BadStreamRequest(f"channels is required and must be a non-empty array of at most {MAX_CHANNELS}")
    bad = [repr(c)[:60] for c in channels if not _is_channel(c)]
    if bad:
        raise BadStreamRequest(
            "channels contains unsupported entries: "
            + ", ".join(bad[:5])
            + ". Allowed: "
            + ", ".join(sorted(CHANNELS))
            + ", or any `custom:<name>`."
        )
    namespaces = raw.get("namespaces")
    parsed_ns: tuple[tuple[str, ...], ...] | None = None
    if namespaces is not None:
        if not isinstance(namespaces, list) or len(namespaces) > MAX_NAMESPACES:
            raise BadStreamRequest(f"namespaces must be an array of at most {MAX_NAMESPACES} namespaces")
        for ns in namespaces:
            if (
                not isinstance(ns, list)
                or len(ns) > MAX_SEGMENTS
                or not all(isinstance(s, str) and len(s) <= MAX_SEGMENT_LENGTH for s in ns)
            ):
                raise BadStreamRequest(
                    f"a namespace is an array of at most {MAX_SEGMENTS} strings of at most {MAX_SEGMENT_LENGTH}"
                )
        parsed_ns = tuple(tuple(ns) for ns in namespaces) or None
    depth = raw.get("depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH):
        raise BadStreamRequest(f"depth must be an integer from 0 to {MAX_DEPTH}")
    since = raw.get("since")
    if since is not None and (isinstance(since, bool) or not isinstance(since, int) or not 0 <= since <= SEQ_MAX):
        raise BadStreamRequest("since must be a seq this server sent (a non-negative integer)")
    return Subscription(frozenset(channels), parsed_ns, depth, since)


# The last event slot of a turn's seq range. A final event written by
# anyone but the run (an expired lease, a cancel, a restart) has the log's
# largest id (2³¹ - 1, docs/storage.md, "Event log"): it takes this slot,
# so it stays inside its turn's range, above all the turn's other events.
LAST_SLOT = SEQ_PER_TURN // SEQ_PER_EVENT - 1


def seq_of(number: int, event_id: int, k: int = 0) -> int:
    return number * SEQ_PER_TURN + min(event_id, LAST_SLOT) * SEQ_PER_EVENT + k


def _channel(method: str) -> str:
    return "input" if method == "input.requested" else method


def matches(sub: Subscription, method: str, namespace: list[str], data: Any) -> bool:
    """As the SDK filters (langgraph_sdk.stream.subscription): the channel,
    or `custom:<name>` for a custom event of that name; a namespace prefix,
    at most `depth` below it."""
    channel = _channel(method)
    named = method == "custom" and isinstance(data, dict) and f"custom:{data.get('name')}" in sub.channels
    if channel not in sub.channels and not named:
        return False
    if sub.namespaces is None:
        return sub.depth is None or len(namespace) <= sub.depth
    for prefix in sub.namespaces:
        if tuple(namespace[: len(prefix)]) == prefix and (
            sub.depth is None or len(namespace) - len(prefix) <= sub.depth
        ):
            return True
    return False


@dataclass(frozen=True)
class WireEvent:
    seq: int
    method: str
    namespace: list[str]
    data: Any
    text: str


def _wire(turn_id: UUID, event: TurnEvent, seq: int, k: int | None, method: str, params: dict[str, Any]) -> WireEvent:
    event_id = f"{turn_id}:{event.id}" if k is None else f"{turn_id}:{event.id}:{k}"
    body = {"type": "event", "event_id": event_id, "seq": seq, "method": method, "params": params}
    return WireEvent(
        seq, method, params.get("namespace") or [], params.get("data"), json.dumps(body, ensure_ascii=False)
    )


def _lifecycle(
    turn_id: UUID, number: int, event: TurnEvent, k: int | None, data: dict[str, Any], now: int
) -> WireEvent:
    seq = seq_of(number, event.id, k or 0)
    return _wire(turn_id, event, seq, k, "lifecycle", {"namespace": [], "timestamp": now, "data": data})


def wire_events(
    turn_id: UUID, number: int, event: TurnEvent, graph: str, now: int, where: dict[str, list[str]] | None = None
) -> list[WireEvent]:
    """The protocol events one turn event stands for (none for most);
    `where`: the subgraph namespace of a paused turn's interrupts, each
    announced there (the root's: in the root)."""
    if event.event == "turn":
        return [_lifecycle(turn_id, number, event, None, {"event": "running", "graph_name": graph}, now)]
    if event.event == PROTOCOL_EVENT:
        logged = json.loads(event.data)
        params = {k: logged[k] for k in ("namespace", "timestamp", "data", "node") if k in logged}
        return [_wire(turn_id, event, seq_of(number, event.id), None, str(logged.get("method")), params)]
    if event.event == "error":
        told = json.loads(event.data)
        message = told.get("message") if isinstance(told, dict) else None
        return [_lifecycle(turn_id, number, event, None, {"event": "failed", "error": message or "run failed"}, now)]
    if event.event != "done":
        return []
    told = json.loads(event.data)
    told = told if isinstance(told, dict) else {}
    if told.get("status") != "interrupted":
        return [_lifecycle(turn_id, number, event, None, {"event": "completed"}, now)]
    out: list[WireEvent] = []
    for k, interrupt in enumerate(told.get("interrupts") or []):
        value = interrupt.get("value") if isinstance(interrupt, dict) else None
        interrupt_id = interrupt.get("id") if isinstance(interrupt, dict) else None
        data = {"interrupt_id": interrupt_id, "payload": value}
        params = {"namespace": (where or {}).get(str(interrupt_id), []), "timestamp": now, "data": data}
        out.append(_wire(turn_id, event, seq_of(number, event.id, k + 1), k + 1, "input.requested", params))
    k = len(out) + 1
    out.append(_lifecycle(turn_id, number, event, k, {"event": "interrupted"}, now))
    return out


async def follow_thread(*, owner: str, key: str, graph: str, sub: Subscription) -> AsyncGenerator[ProtocolEvent, None]:
    """The thread's events past `since` (none: from its newest run's start)
    that `sub` matches, then its next runs' as they come, for as long as the
    client stays; it ends if the thread is deleted (its epoch changes)."""
    async for wire in thread_wire_events(owner=owner, key=key, graph=graph, since=sub.since):
        if matches(sub, wire.method, wire.namespace, wire.data):
            yield ProtocolEvent(wire.seq, wire.method, wire.text)


async def thread_wire_events(*, owner: str, key: str, graph: str, since: int | None) -> AsyncGenerator[WireEvent, None]:
    """Every protocol event of the thread past `since` (None: from its
    newest run's start), then its next runs' as they come."""
    async for turn_id, number, after in thread_turns(owner=owner, key=key, since=since):
        async for wire in _turn_events(turn_id, number, after, graph):
            if since is None or wire.seq > since:
                yield wire


async def thread_turns(*, owner: str, key: str, since: int | None) -> AsyncGenerator[tuple[UUID, int, int], None]:
    """The thread's runs (turns) a stream past `since` reads, oldest first,
    then its next ones as they come, as (turn id, number, the log id to
    read after); it ends when the thread is deleted (its epoch changes)."""
    start = since // SEQ_PER_TURN if since is not None else None
    try:
        epoch, turns = await db(turn_numbers_from, owner=owner, key=key, number=start)
    except SessionNotFound:
        return
    last = start - 1 if start else 0
    while True:
        for turn_id, number in turns:
            after = 0
            if since is not None and number == since // SEQ_PER_TURN:
                after = max(0, (since % SEQ_PER_TURN) // SEQ_PER_EVENT - 1)
            yield turn_id, number, after
            last = number
        while True:
            try:
                now_epoch, turns = await db(turn_numbers_from, owner=owner, key=key, number=last + 1)
            except SessionNotFound:
                return
            if now_epoch != epoch:
                return
            if turns:
                break
            await asyncio.sleep(NEXT_RUN_POLL_SECONDS)


async def _turn_events(turn_id: UUID, number: int, after: int, graph: str) -> AsyncGenerator[WireEvent, None]:
    events = replay_from(turn_id, after)
    try:
        async for event in events:
            now = int(time.time() * 1000)
            where = await _interrupts_where(turn_id, event)
            if len(event.data) > PARSE_ON_LOOP_MAX:
                wires = await asyncio.to_thread(wire_events, turn_id, number, event, graph, now, where)
            else:
                wires = wire_events(turn_id, number, event, graph, now, where)
            for wire in wires:
                yield wire
    finally:
        await close(events)


async def _interrupts_where(turn_id: UUID, event: TurnEvent) -> dict[str, list[str]] | None:
    """For a paused turn's `done`: where each of its interrupts was raised,
    read from the log (the same on every process and every replay)."""
    if event.event != "done" or '"interrupted"' not in event.data:
        return None
    told = (
        json.loads(event.data)
        if len(event.data) <= PARSE_ON_LOOP_MAX
        else await asyncio.to_thread(json.loads, event.data)
    )
    if not isinstance(told, dict) or told.get("status") != "interrupted":
        return None
    ids = [str(i["id"]) for i in told.get("interrupts") or () if isinstance(i, dict) and i.get("id")][:MAX_NAMESPACES]
    return await db(interrupt_namespaces, turn_id=turn_id, interrupt_ids=ids) if ids else None
