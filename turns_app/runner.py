"""Drives one chat turn through claim → run → commit for both deliveries (the
JSON endpoint and the SSE stream). One code path, two ways to deliver it.

A fresh turn runs in its own task, registered by turn id, so it can outlive
the request that started it (`AGENT_ON_DISCONNECT=continue`) and so another
request in this process can follow it live.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.conf import settings

from agentsite.asyncdb import db, is_storage_error, retry_while_busy
from agentsite.errors import (
    ApiError,
    InternalError,
    ModelError,
    ModelTimeout,
    StaleTurn,
    StorageUnavailable,
    TurnCancelled,
)
from turns_app.graph_run import run_graph
from turns_app.protocol import Claim, Replay, turn_abort, turn_claim, turn_commit, turn_renew_lease

logger = logging.getLogger(__name__)


def _is_timeout(exc: BaseException) -> bool:
    import httpx
    import openai

    return isinstance(exc, (TimeoutError, httpx.TimeoutException, openai.APITimeoutError))


@dataclass(frozen=True)
class TurnEvent:
    id: int
    event: str
    data: str  # JSON text


class TurnRun:
    """A running turn: its events so far, live subscribers, and the task that
    produces them. `done` is emitted only after the commit returned."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.events: list[TurnEvent] = []
        self._subscribers: list[asyncio.Queue[TurnEvent | None]] = []
        self._lease_lost = False
        self._started = False
        self.task: asyncio.Task[str] | None = None

    @property
    def turn_id(self) -> UUID:
        return self.claim.turn_id

    def start(self) -> "TurnRun":
        self.task = asyncio.create_task(self._execute(), name=f"turn-{self.turn_id}")
        _running[self.turn_id] = self
        self.task.add_done_callback(self._finished)
        return self

    def _finished(self, task: asyncio.Task) -> None:
        _running.pop(self.turn_id, None)
        if not self._started:
            # Cancelled before its first step: _execute never ran, so nothing
            # aborted the turn or told the subscribers.
            self._close_subscribers()
            _background.add(task := asyncio.ensure_future(self._abort(TurnCancelled())))
            task.add_done_callback(_background.discard)

    async def emit(self, event: str, data: dict[str, Any] | str) -> None:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        item = TurnEvent(id=len(self.events) + 1, event=event, data=text)
        self.events.append(item)
        for queue in self._subscribers:
            queue.put_nowait(item)

    def subscribe(self, after: int = 0) -> AsyncIterator[TurnEvent]:
        """Events with id > after: the ones already emitted, then live ones."""
        queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        backlog = [e for e in self.events if e.id > after]
        self._subscribers.append(queue)
        finished = self.task is not None and self.task.done()

        async def iterate() -> AsyncIterator[TurnEvent]:
            try:
                seen = after
                for item in backlog:
                    seen = item.id
                    yield item
                if finished:
                    return
                while True:
                    item = await queue.get()
                    if item is None:
                        return
                    if item.id > seen:
                        seen = item.id
                        yield item
            finally:
                if queue in self._subscribers:
                    self._subscribers.remove(queue)

        return iterate()

    def _close_subscribers(self) -> None:
        for queue in self._subscribers:
            queue.put_nowait(None)

    async def _keep_lease(self, graph_task: asyncio.Task) -> None:
        interval = max(settings.AGENT_TURN_LEASE_SECONDS / 3, 0.01)
        while not graph_task.done():
            await asyncio.sleep(interval)
            try:
                held = await db(turn_renew_lease, turn_id=self.turn_id)
            except StorageUnavailable:
                continue  # the commit will tell; an outage alone is no reason to stop
            if not held:
                self._lease_lost = True
                graph_task.cancel()
                return

    async def _abort(self, error: ApiError, code: str | None = None) -> None:
        try:
            await db(
                turn_abort,
                turn_id=self.turn_id,
                code=code or str(error.code),
                message=error.message,
                thread_id=self.claim.thread_id,
            )
        except Exception:
            # The lease runs out on its own; the next claim aborts the turn then.
            logger.exception("could not abort turn %s", self.turn_id)

    async def _execute(self) -> str:
        self._started = True
        claim = self.claim
        try:
            await self.emit(
                "turn",
                {
                    "turn_id": str(claim.turn_id),
                    "epoch": claim.epoch,
                    "number": claim.number,
                    "base_version": claim.base_version,
                },
            )
            body = await self._run_and_commit()
            await self.emit("done", body)
            return body
        except ApiError as error:
            # The client hears first; the abort may wait on a database that is away.
            await self.emit("error", error.as_dict()["error"])
            await self._abort(error)
            raise
        except asyncio.CancelledError:
            await self.emit("error", TurnCancelled().as_dict()["error"])
            await self._abort(TurnCancelled())
            raise
        except Exception:
            logger.exception("turn %s failed", self.turn_id)
            await self.emit("error", InternalError().as_dict()["error"])
            await self._abort(InternalError("the turn failed on the server"))
            raise
        finally:
            self._close_subscribers()

    async def _run_and_commit(self) -> str:
        """Runs the graph and commits. Raises the ApiError the client should
        see; `_execute` reports it and aborts the turn."""
        graph_task = asyncio.create_task(run_graph(self.claim, self.emit))
        keeper = asyncio.create_task(self._keep_lease(graph_task))
        try:
            async with asyncio.timeout(settings.AGENT_MODEL_TIMEOUT_SECONDS):
                outcome = await graph_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._lease_lost and (current is None or current.cancelling() == 0):
                raise StaleTurn("the turn lost its lease on the session") from None
            raise
        except TimeoutError:
            raise ModelTimeout() from None
        except ApiError:
            raise
        except Exception as exc:
            if is_storage_error(exc):
                raise StorageUnavailable() from exc
            if _is_timeout(exc):
                raise ModelTimeout() from exc
            logger.warning("turn %s: the model failed: %r", self.turn_id, exc)
            raise ModelError(f"the model failed: {type(exc).__name__}; nothing was committed") from exc
        finally:
            keeper.cancel()
        # Once the commit is sent it runs to its end even if the caller is
        # cancelled: its answer (done, or stale/storage error) is the turn's.
        commit = asyncio.ensure_future(db(turn_commit, turn_id=self.turn_id, outcome=outcome))
        try:
            return await asyncio.shield(commit)
        except asyncio.CancelledError:
            await asyncio.wait([commit])
            if commit.cancelled() or commit.exception() is not None:
                raise
            # The commit won the race with the cancel: the turn is committed,
            # and saying otherwise would be a lie (a retry replays it anyway).
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            return commit.result()


_running: dict[UUID, TurnRun] = {}
_background: set[asyncio.Future] = set()  # strong refs to fire-and-forget aborts


def running_turn(turn_id: UUID) -> TurnRun | None:
    return _running.get(turn_id)


async def start_turn(
    *, owner: str, key: str, request: dict[str, Any], idempotency_key: str | None
) -> Replay | TurnRun:
    claimed = await retry_while_busy(
        turn_claim, owner=owner, key=key, request=request, idempotency_key=idempotency_key
    )
    if isinstance(claimed, Replay):
        return claimed
    return TurnRun(claimed).start()


async def await_turn(run: TurnRun) -> str:
    """The committed body. With AGENT_ON_DISCONNECT=continue a cancelled
    caller (client gone) leaves the turn running to its commit."""
    assert run.task is not None
    if settings.AGENT_ON_DISCONNECT == "continue":
        return await asyncio.shield(run.task)
    return await run.task
