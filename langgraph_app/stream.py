"""A turn's event log as the protocol's SSE stream: `metadata` first (our
`turn` event), the stream modes the client asked for (logged by the graph
step for protocol runs, turns_app.types.EVENT_OF_MODE), `end` last (our `done`,
so only after the commit) or `error` instead. The ids are the log's, so
they rise strictly and a client resumes with Last-Event-ID from any
process; our own events (delta, fields, tool calls) are left out."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from core.errors import ValidationFailed
from core.http.errors import run_error
from turns_app.native_json import dumps
from turns_app.types import EVENT_OF_MODE, TurnEvent

LAST_EVENT_ID_MAX_DIGITS = 18


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
    return frozenset(EVENT_OF_MODE[m] for m in modes if m in EVENT_OF_MODE)


async def close(events: AsyncIterator[Any]) -> None:
    """Closing a turn's stream now ends its subscription now, not at garbage
    collection (turns_app's streams are async generators, typed as iterators)."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


async def protocol_events(
    events: AsyncIterator[TurnEvent], run_id: UUID, modes: Iterable[str]
) -> AsyncGenerator[ProtocolEvent, None]:
    wanted = events_of(modes)
    try:
        async for event in events:
            if event.event == "turn":
                yield ProtocolEvent(event.id, "metadata", dumps({"run_id": str(run_id), "attempt": 1}))
            elif event.event in wanted:
                yield ProtocolEvent(event.id, event.event, event.data)
            elif event.event == "done":
                yield ProtocolEvent(event.id, "end", "null")
            elif event.event == "error":
                told: Any = json.loads(event.data)
                told = told if isinstance(told, dict) else {}
                yield ProtocolEvent(event.id, "error", dumps(run_error(told.get("code"), told.get("message"))))
    finally:
        await close(events)
