"""A turn's event log as the protocol's SSE stream: `metadata` first (our
`turn` event), the stream modes the client asked for (logged by the graph
step for protocol runs, turns_app.types.EVENTS_OF_MODE), `end` last (our `done`,
so only after the commit) or `error` instead. The ids are the log's, so
they rise strictly and a client resumes with Last-Event-ID from any
process; our own events (delta, fields, tool calls) are left out.

Two events are sent otherwise than logged: a subgraph's part, logged as
`<event>|` with `[namespace, data]`, goes out as `<event>|<ns>|…` with its
data, as LangGraph's server names it; a `messages/partial`, logged as its
chunk, goes out as the message so far (its chunks added up, as a
message), which is why a client resuming mid-message is answered from a
replay of the whole log (`replays_whole`)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessageChunk, message_chunk_to_message, messages_from_dict

from core.errors import ValidationFailed
from core.http.errors import run_error
from turns_app.native_json import dumps
from turns_app.types import EVENTS_OF_MODE, SUBGRAPH_MARK, TERMINAL_EVENTS, TurnEvent

LAST_EVENT_ID_MAX_DIGITS = 18
PARTIAL = "messages/partial"
_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class ProtocolEvent:
    id: int
    event: str
    data: str  # one line of JSON


def parse_last_event_id(raw: str | None) -> int:
    """useStream sends -1 for "everything"."""
    raw = (raw or "").strip()
    if raw in ("", "-1"):
        return 0
    if not (raw.isascii() and raw.isdigit() and len(raw) <= LAST_EVENT_ID_MAX_DIGITS):
        raise ValidationFailed("Last-Event-ID must be the id of an event of this run (or -1)")
    return int(raw)


def events_of(modes: Iterable[str]) -> frozenset[str]:
    return frozenset().union(*(EVENTS_OF_MODE[m] for m in modes if m in EVENTS_OF_MODE))


def replays_whole(modes: Iterable[str]) -> bool:
    """A stream of these modes resumed after an id is answered from the
    whole log: a `messages/partial` past that id needs the chunks before it."""
    return PARTIAL in events_of(modes)


def already_sent(event: TurnEvent, sent: int) -> bool:
    """Whether a client holding id `sent` has had `event` (a final event it
    has not seen it always gets, as turns_app.events follows a log)."""
    return event.id <= sent and not (event.event in TERMINAL_EVENTS and event.id != sent)


class Wire:
    """How the logged events of a run's stream modes are sent: by name, a
    subgraph's under its namespaced name, a partial as the message so far."""

    def __init__(self, modes: Iterable[str]) -> None:
        self.wanted = events_of(modes)
        self.messages: dict[Any, BaseMessageChunk] = {}

    def read(self, event: TurnEvent) -> None:
        """An event the client had: only what later partials add up."""
        if event.event == PARTIAL and PARTIAL in self.wanted:
            self._partial(event.data)

    def sent(self, event: TurnEvent) -> tuple[str, str] | None:
        """The name and data an event of the stream modes goes out as; None
        for any other event."""
        if event.event == PARTIAL and PARTIAL in self.wanted:
            return PARTIAL, self._partial(event.data)
        if event.event in self.wanted:
            return event.event, event.data
        if event.event.endswith(SUBGRAPH_MARK) and event.event[: -len(SUBGRAPH_MARK)] in self.wanted:
            return _subgraph_event(event.event, event.data)
        return None

    def _partial(self, data: str) -> str:
        logged = json.loads(data)
        if not isinstance(logged, dict) or not isinstance(logged.get("type"), str):
            return data
        (chunk,) = messages_from_dict([{"type": logged["type"], "data": logged}])
        if not isinstance(chunk, BaseMessageChunk):
            return dumps([chunk])
        key = chunk.id
        so_far = self.messages.get(key)
        so_far = chunk if so_far is None else so_far + chunk
        self.messages[key] = so_far
        return dumps([message_chunk_to_message(so_far)])


def _subgraph_event(event: str, data: str) -> tuple[str, str]:
    """`<event>|` logged with `[namespace, data]`: the name and data sent."""
    namespace, end = _decoder.raw_decode(data, 1)
    rest = data[end:].lstrip()
    names = [str(n) for n in namespace] if isinstance(namespace, list) else []
    return SUBGRAPH_MARK.join([event[: -len(SUBGRAPH_MARK)], *names]), rest[1:-1].strip()


async def close(events: AsyncIterator[Any]) -> None:
    """Closing a turn's stream now ends its subscription now, not at garbage
    collection (turns_app's streams are async generators, typed as iterators)."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


async def protocol_events(
    events: AsyncIterator[TurnEvent], run_id: UUID, modes: Iterable[str], *, sent: int = 0
) -> AsyncGenerator[ProtocolEvent, None]:
    """`events` as the protocol sends them; those up to id `sent` (the
    client's Last-Event-ID, when `events` replays the whole log) are read,
    not sent again, but for a final event the client has not seen."""
    wire = Wire(modes)
    try:
        async for event in events:
            if already_sent(event, sent):
                wire.read(event)
                continue
            out = wire.sent(event)
            if out is not None:
                yield ProtocolEvent(event.id, *out)
            elif event.event == "turn":
                yield ProtocolEvent(event.id, "metadata", dumps({"run_id": str(run_id), "attempt": 1}))
            elif event.event == "done":
                yield ProtocolEvent(event.id, "end", "null")
            elif event.event == "error":
                told: Any = json.loads(event.data)
                told = told if isinstance(told, dict) else {}
                yield ProtocolEvent(event.id, "error", dumps(run_error(told.get("code"), told.get("message"))))
    finally:
        await close(events)
