"""The turn event log: what a turn's stream carries, numbered 1, 2, 3, …

A running turn's events live in its `EventLog` (this process), which keeps
them for `RETAIN_FINISHED_SECONDS` after the turn ended so a client that
lost its stream near the end re-attaches with the ids it already holds.
Otherwise a finished turn's stream is rebuilt from its row (`stored_events`),
condensed, ending on the id its terminal event had live. The contract either
way: a client that has not seen the terminal event (`done` or `error`) gets
it; one that has gets nothing more.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from agentsite.errors import InternalError
from turns_app.models import AgentTurn
from turns_app.types import TERMINAL_EVENTS, TurnEvent

RETAIN_FINISHED_SECONDS = 120.0

_logs: dict[UUID, "EventLog"] = {}


def _json(data: dict[str, Any] | str) -> str:
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


class EventLog:
    """One turn's events in this process, and the clients following them."""

    def __init__(self, turn_id: UUID) -> None:
        self.turn_id = turn_id
        self.events: list[TurnEvent] = []
        self.closed = False
        self.followed = False
        self._followers: list[asyncio.Queue[TurnEvent | None]] = []
        _logs[turn_id] = self

    @property
    def next_id(self) -> int:
        return len(self.events) + 1

    def append(self, event: str, data: dict[str, Any] | str) -> TurnEvent:
        item = TurnEvent(id=self.next_id, event=event, data=_json(data))
        self.events.append(item)
        for queue in self._followers:
            queue.put_nowait(item)
        return item

    def close(self) -> None:
        """The turn is over: followers get what is left, then the end. A log
        someone streamed stays findable for a while, for clients re-attaching
        with the ids they hold; others are rebuilt from storage if asked for."""
        if self.closed:
            return
        self.closed = True
        for queue in self._followers:
            queue.put_nowait(None)
        if not self.followed:
            _logs.pop(self.turn_id, None)
            return
        try:
            asyncio.get_running_loop().call_later(
                RETAIN_FINISHED_SECONDS, _logs.pop, self.turn_id, None
            )
        except RuntimeError:  # no loop (a sync caller): nothing to keep it for
            _logs.pop(self.turn_id, None)

    @property
    def ended(self) -> bool:
        return bool(self.events) and self.events[-1].event in TERMINAL_EVENTS

    async def follow(self, after: int = 0) -> AsyncIterator[TurnEvent]:
        """Events with id > after: those already logged, then live ones, up to
        the terminal event. A turn that ended without one (a bug in it) still
        ends with an `error`: a stream never just stops."""
        self.followed = True
        queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        backlog = [e for e in self.events if e.id > after]
        closed = self.closed
        self._followers.append(queue)
        try:
            seen = after
            for item in backlog:
                seen = item.id
                yield item
                if item.event in TERMINAL_EVENTS:
                    return
            while not closed:
                item = await queue.get()
                if item is None:
                    break
                if item.id > seen:
                    seen = item.id
                    yield item
                    if item.event in TERMINAL_EVENTS:
                        return
        finally:
            if queue in self._followers:
                self._followers.remove(queue)
        if not self.ended:
            yield TurnEvent(self.next_id, "error", _json(InternalError().as_dict()["error"]))


def event_log(turn_id: UUID) -> EventLog | None:
    """The turn's log if it runs here or ended here recently."""
    return _logs.get(turn_id)


# --- finished turns, from their rows ---------------------------------------------------


def stored_events(turn: AgentTurn, *, live_ids: bool = True) -> list[TurnEvent]:
    """A finished turn's stream rebuilt from its row, with no model call:
    `turn`, `fields`, the whole reply as one `delta`, `done` (the stored body,
    verbatim) — or `turn`, `error` for an aborted turn. With `live_ids` the
    terminal event takes the id it had live (`turn.last_event_id`) when that
    is known, so a client's Last-Event-ID from the live stream still places
    it before or after the end; without, ids run 1, 2, 3, … (a replay: a new
    stream for a new request). Rejected field proposals are not stored, so
    `fields` carries the committed `field_changes` only."""
    items: list[tuple[str, Any]] = [
        (
            "turn",
            {
                "turn_id": str(turn.id),
                "epoch": turn.epoch,
                "number": turn.number,
                "base_version": turn.base_version,
            },
        )
    ]
    if turn.status == AgentTurn.Status.COMMITTED:
        body = json.loads(turn.result)
        items += [
            ("fields", {"field_changes": body["field_changes"]}),
            ("delta", {"text": body["reply"]}),
            ("done", turn.result),
        ]
    else:
        items.append(("error", turn.error))
    terminal_id = (live_ids and turn.last_event_id) or len(items)
    # Ids before the terminal one: 1, 2, …, but never reaching it (a short live
    # stream, e.g. no `fields`, ends on a small id: the middle events go).
    body_items = items[:-1][: terminal_id - 1]
    events = [TurnEvent(n, name, _json(data)) for n, (name, data) in enumerate(body_items, start=1)]
    events.append(TurnEvent(terminal_id, items[-1][0], _json(items[-1][1])))
    return events


def unseen(turn: AgentTurn, after: int) -> list[TurnEvent]:
    """The stored stream past Last-Event-ID. A client whose id is below the
    terminal event's has not seen it, whatever else it saw. For a turn that
    finished without recording that id (before it was recorded), an id past
    the condensed stream came from the longer live one: the client gets the
    terminal event, which carries the whole outcome."""
    events = stored_events(turn)
    rest = [e for e in events if e.id > after]
    if not rest and turn.last_event_id is None and after > events[-1].id:
        rest = events[-1:]
    return rest
