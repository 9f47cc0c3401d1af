"""The turn event log: a turn's stream, numbered 1, 2, 3, … once for its
whole life, stored in `agent_turn_events` and readable from any process.

The process running a turn keeps its `EventLog`: events reach the clients
following it here at once, and are written to the table in small batches
(`BATCH_EVENTS` or `BATCH_SECONDS`, whichever comes first), outside the
session's lock. Events that shape the turn (`fields`, tool calls) are
written before anyone sees them; `turn` is written by the claim, `done` by
the commit and `error` by the abort, in their transactions.

Any other client — another process, after a restart — follows the table
(`follow_stored`), woken by `wakeups` when new rows land. The contract
either way: a client that has not seen the final event (`done`/`error`)
gets it, whatever id it holds; one that has gets nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any
from uuid import UUID

from core.asyncdb import db
from core.errors import InternalError, StaleTurn
from core.http import errors
from turns_app import wakeups
from turns_app.selectors import turn_events_after
from turns_app.services import events_append, turn_expire_if_dead
from turns_app.types import TERMINAL_EVENTS, TurnEvent

logger = logging.getLogger(__name__)

# A follower on another process sees deltas at most BATCH_SECONDS late; a
# model streaming 50 tokens/s costs ~20 small writes a second instead of
# 50, and a turn that ends within the window writes its deltas with the
# commit (docs/scale.md). BATCH_EVENTS bounds what waits in memory.
BATCH_EVENTS = 64
BATCH_SECONDS = 0.05
# A stored follower re-reads the log this often even if nothing woke it, and
# checks then whether the turn's process died (its lease ran out).
RECHECK_SECONDS = 1.0

_logs: dict[UUID, EventLog] = {}


def encode(data: dict[str, Any] | str) -> str:
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def event_log(turn_id: UUID) -> EventLog | None:
    """The turn's log if the turn is running in this process."""
    return _logs.get(turn_id)


class EventLog:
    """One running turn's events, in the process running it."""

    def __init__(self, turn_id: UUID, first: TurnEvent) -> None:
        self.turn_id = turn_id
        self.events: list[TurnEvent] = [first]  # shown to followers, in order
        self._seq = first.id  # the last id given out
        self.closed = False
        self._followers: list[asyncio.Queue[TurnEvent | None]] = []
        self._unwritten: list[TurnEvent] = []
        self._writing = asyncio.Lock()
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task] = set()
        self._gone = False  # the turn was deleted: nothing to write any more
        _logs[turn_id] = self

    @property
    def next_seq(self) -> int:
        return self._seq + 1

    def _new(self, event: str, data: dict[str, Any] | str) -> TurnEvent:
        self._seq += 1
        return TurnEvent(self._seq, event, encode(data))

    # -- writing --------------------------------------------------------------------------

    def append(self, event: str, data: dict[str, Any] | str) -> TurnEvent:
        """Shown to local followers now, written with the next batch."""
        item = self._new(event, data)
        self.publish(item)
        self._unwritten.append(item)
        if len(self._unwritten) >= BATCH_EVENTS:
            self._start_flush()
        elif self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(BATCH_SECONDS, self._start_flush)
        return item

    async def append_written(self, event: str, data: dict[str, Any] | str) -> TurnEvent:
        """Written (with everything before it) before any follower sees it."""
        item = self._new(event, data)
        self._unwritten.append(item)
        await self.flush()
        self.publish(item)
        return item

    def stage(self, event: str, data: dict[str, Any] | str) -> TurnEvent:
        """An event for the final transaction to write, shown by the run once
        that committed."""
        item = self._new(event, data)
        self._unwritten.append(item)
        return item

    def _start_flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        task = asyncio.ensure_future(self.flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def flush(self) -> None:
        """Write what is unwritten. A failed write keeps it for the next
        attempt (the final event's transaction writes whatever is left)."""
        async with self._writing:
            batch, self._unwritten = self._unwritten, []
            if not batch or self._gone:
                return
            try:
                self._gone = not await db(events_append, turn_id=self.turn_id, events=batch)
            except Exception as exc:
                logger.warning("turn %s: could not write %d event(s): %r", self.turn_id, len(batch), exc)
                self._unwritten = batch + self._unwritten

    async def take_unwritten(self) -> list[TurnEvent]:
        """For the transaction that writes the final event: everything not
        yet written, once any batch in flight has landed. Call `give_back`
        if that transaction fails."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        async with self._writing:
            batch, self._unwritten = self._unwritten, []
            return batch

    def give_back(self, batch: list[TurnEvent]) -> None:
        self._unwritten = batch + self._unwritten

    # -- reading --------------------------------------------------------------------------

    def publish(self, item: TurnEvent) -> None:
        """Show an event to the followers here (the final event is published
        by the run once its transaction wrote it)."""
        self._seq = max(self._seq, item.id)
        self.events.append(item)
        for queue in self._followers:
            queue.put_nowait(item)

    def close(self) -> None:
        """The turn is over: followers get what is left, then the end."""
        if self.closed:
            return
        self.closed = True
        _logs.pop(self.turn_id, None)
        for queue in self._followers:
            queue.put_nowait(None)

    @property
    def ended(self) -> bool:
        return self.events[-1].event in TERMINAL_EVENTS

    async def follow(self, after: int = 0) -> AsyncGenerator[TurnEvent, None]:
        """Events with id > after: those already shown, then live ones, up to
        the final event, which a client that has not seen it always gets. A
        turn that ended without one (a bug in it) still ends with an `error`:
        a stream never just stops."""
        queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        backlog = list(self.events)
        closed = self.closed
        self._followers.append(queue)
        try:
            for item in backlog:
                if _wanted(item, after):
                    yield item
                if item.event in TERMINAL_EVENTS:
                    return
            while not closed:
                live = await queue.get()
                if live is None:
                    break
                if _wanted(live, after):
                    yield live
                if live.event in TERMINAL_EVENTS:
                    return
        finally:
            if queue in self._followers:
                self._followers.remove(queue)
        if not self.ended:
            yield TurnEvent(self.next_seq, "error", errors.event_data(InternalError()))


async def _expire_if_dead(turn_id: UUID) -> None:
    await db(turn_expire_if_dead, turn_id=turn_id)


def _wanted(item: TurnEvent, after: int) -> bool:
    """Past the client's id, or the final event it has not seen (a client
    can hold an id past what is logged when events it saw were never
    written: its process died before the batch landed; a final event
    written outside the run takes an id past all of them,
    services.event_rows.OUTSIDE_FINAL_SEQ)."""
    return item.id > after or (item.event in TERMINAL_EVENTS and item.id != after)


async def follow_stored(turn_id: UUID, after: int) -> AsyncGenerator[TurnEvent, None]:
    """A turn's events from the table, past `after`, then as they are
    written (by any process), up to the final event. If the process running
    the turn died, the turn is aborted here once its lease has run out
    (`lease_expired`), so the follower still gets its `error`."""
    async with contextlib.AsyncExitStack() as stack:
        woken: wakeups.Wakeup | None = None
        while True:
            logged = await db(turn_events_after, turn_id=turn_id, after=after)
            for item in logged.events:
                after = max(after, item.id)
                yield item
                if item.event in TERMINAL_EVENTS:
                    return
            if not logged.running:
                final = logged.final
                if final is None:  # deleted with its session while it ran
                    gone = StaleTurn("the session was deleted while the turn ran")
                    final = TurnEvent(after + 1, "error", errors.event_data(gone))
                if final.id != after:
                    yield final
                return
            if woken is None:
                # Subscribed only to a turn still running (a replay of a
                # finished one registers no follower), then read again:
                # what was written since the read above.
                woken = await stack.enter_async_context(wakeups.subscription(turn_id))
                continue
            if not await woken.wait(RECHECK_SECONDS):
                await _expire_if_dead(turn_id)


def replay_from(turn_id: UUID, after: int = 0) -> AsyncGenerator[TurnEvent, None]:
    """A turn's stream for a client, from wherever it is: this process's
    log if it runs here, else the table."""
    log = event_log(turn_id)
    return log.follow(after) if log is not None else follow_stored(turn_id, after)
