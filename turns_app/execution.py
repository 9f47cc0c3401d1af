"""The execution of a running turn: claim → run → commit as one asyncio task,
for both deliveries (the JSON endpoint and the SSE stream).

A claimed turn runs in its own task, registered by turn id, so it can outlive
the request that started it (`AGENT_ON_DISCONNECT=continue`). While it runs a
lease keeper renews its hold on the session; its events go to its
`events.EventLog`; `done` is emitted only after the commit returned.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Coroutine, Sequence
from typing import Any
from uuid import UUID

import httpx
import openai
from django.conf import settings

from core.asyncdb import db, is_storage_error
from core.errors import (
    ApiError,
    InternalError,
    ModelError,
    ModelTimeout,
    StaleTurn,
    StorageUnavailable,
    TurnCancelled,
    error_for,
)
from core.http import errors
from turns_app import history, observability, running, session_wait, shutdown, stream_parts, wakeups
from turns_app.events import EventLog
from turns_app.graph_step import run_graph
from turns_app.services import turn_abort, turn_claim, turn_commit, turn_renew_lease
from turns_app.types import Claim, Replay, TurnEvent

logger = logging.getLogger(__name__)

# Shown to followers here at once, written in the next batch; every other
# event of a run is written before it is shown. Protocol runs' LangGraph-native
# parts (turns_app.stream_parts) are tentative like deltas: a round trip to
# the database per token or step would slow the run down.
SHOWN_BEFORE_WRITTEN = frozenset({"delta"}) | stream_parts.EVENTS
# How long the clients here wait for a failed turn's `error` to be written.
ERROR_WRITE_SECONDS = 2.0
_background: set[asyncio.Future] = set()  # strong refs to fire-and-forget work


def _in_background(coro: Coroutine[Any, Any, Any]) -> None:
    task = asyncio.ensure_future(coro)
    _background.add(task)
    task.add_done_callback(_background.discard)


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (TimeoutError, httpx.TimeoutException, openai.APITimeoutError))


async def abort_claimed(
    claim: Claim, error: ApiError, *, pending: Sequence[TurnEvent] = (), seq: int | None = None
) -> TurnEvent | None:
    """Abort a claimed turn whose run is over (or never started); returns its
    final event as stored, or None if that could not be done or read."""
    try:
        return await db(
            turn_abort,
            turn_id=claim.turn_id,
            code=str(error.code),
            message=error.message,
            thread_id=claim.thread_id,
            pending=list(pending),
            seq=seq,
        )
    except Exception:
        # The lease runs out on its own; the next claim aborts the turn then.
        logger.exception("could not abort turn %s", claim.turn_id)
        return None


class LeaseKeeper:
    """Renews a running turn's lease every third of its length. If the turn
    lost the session (fenced off), or renewals kept failing until the lease
    ran out (another claim may take the session now), it stops the run: a
    turn is either renewing or stopped, never running on a lease it lost."""

    def __init__(self, turn_id: UUID, run: asyncio.Task) -> None:
        self.turn_id = turn_id
        self.run = run
        self.lost = False
        loop = asyncio.get_running_loop()
        self.lease = settings.AGENT_TURN_LEASE_SECONDS
        self.interval = max(self.lease / 3, 0.01)
        # Measured from before each renewal was sent: never later than the
        # deadline the database set.
        self.held_until = loop.time() + self.lease
        # Most turns end before their first renewal is due: a timer, not a
        # task sleeping for each of them (docs/scale.md).
        self.task: asyncio.Task | None = None
        self._first = loop.call_later(self.interval, self._start)

    def _start(self) -> None:
        if not self.run.done():
            self.task = asyncio.ensure_future(self._keep())

    async def _keep(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.run.done():
            sent = loop.time()
            try:
                held = await db(turn_renew_lease, turn_id=self.turn_id)
            except Exception as exc:
                if is_storage_error(exc) or isinstance(exc, StorageUnavailable):
                    logger.warning("turn %s: could not renew its lease: %r", self.turn_id, exc)
                else:
                    logger.exception("turn %s: renewing its lease failed", self.turn_id)
                if loop.time() < self.held_until:
                    await asyncio.sleep(self.interval)
                    continue  # the lease still holds; try again
                logger.error("turn %s: its lease ran out before a renewal got through", self.turn_id)
                held = False
            if not held:
                self.lost = True
                self.run.cancel()
                return
            self.held_until = sent + self.lease
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        self._first.cancel()
        if self.task is None:
            return
        self.task.cancel()
        await asyncio.wait({self.task})
        if not self.task.cancelled() and self.task.exception() is not None:
            logger.error("turn %s: the lease keeper failed", self.turn_id, exc_info=self.task.exception())


class TurnRun:
    """A claimed turn and the task that runs it to its commit (or abort)."""

    def __init__(self, claim: Claim, *, deltas: bool = True) -> None:
        self.claim = claim
        self.deltas = deltas
        self.log = EventLog(claim.turn_id, claim.first_event)
        self._started = False
        self._keeper: LeaseKeeper | None = None
        self.task: asyncio.Task[str] | None = None
        # Why this server cancelled the run (None: its caller did).
        self.stop_reason: ApiError | None = None

    @property
    def turn_id(self) -> UUID:
        return self.claim.turn_id

    def start(self) -> TurnRun:
        self.task = asyncio.create_task(self._execute(), name=f"turn-{self.turn_id}")
        running.register(self)
        self.task.add_done_callback(self._finished)
        return self

    def stop(self, reason: ApiError) -> None:
        """End the run with `reason` as its error (the server is stopping)."""
        self.stop_reason = reason
        if self.task is not None:
            self.task.cancel()

    def _finished(self, task: asyncio.Task) -> None:
        running.forget(self.turn_id)
        # The events carry the outcome; whoever awaits the task still gets it raised.
        if not task.cancelled():
            task.exception()
        if not self._started:
            # Cancelled before its first step: _execute never ran, so nothing
            # aborted the turn or told the followers.
            _in_background(self._end_unstarted())

    async def emit(self, event: str, data: dict[str, Any] | str) -> None:
        """The graph step's events: deltas are shown at once and written in
        the next batch; the others are written before anyone sees them."""
        if event in SHOWN_BEFORE_WRITTEN:
            observability.delta(self.turn_id)
            self.log.append(event, data)
        else:
            await self.log.append_written(event, data)

    async def _end_unstarted(self) -> None:
        try:
            await self._fail(self.stop_reason or TurnCancelled())
        finally:
            self.log.close()

    async def _fail(self, error: ApiError) -> ApiError:
        """Abort the turn and end its stream with the `error` event as
        stored. The abort writes it; if the database does not answer soon,
        the clients here hear first (with the id it will have) and the abort
        goes on in the background. Returns the error the turn ended with: a
        cancel or a stale commit may have ended it before this run knew."""
        pending = await self.log.take_unwritten()
        seq = self.log.next_seq
        abort = asyncio.ensure_future(abort_claimed(self.claim, error, pending=pending, seq=seq))
        done, _ = await asyncio.wait({abort}, timeout=ERROR_WRITE_SECONDS)
        stored = abort.result() if done else None
        if not done:
            _background.add(abort)
            abort.add_done_callback(_background.discard)
        if stored is None or stored.event != "error":
            stored = TurnEvent(seq, "error", errors.event_data(error))
        self.log.publish(stored)
        told = json.loads(stored.data)
        return error if told.get("code") == str(error.code) else error_for(told.get("code"), told.get("message"))

    async def _execute(self) -> str:
        self._started = True
        try:
            body, final = await self._run_and_commit()
            for event in final:
                self.log.publish(event)
            return body
        except ApiError as error:
            told = await self._fail(error)
            if told is error:
                raise
            raise told from error
        except asyncio.CancelledError:
            await self._fail(self.stop_reason or TurnCancelled())
            if self.stop_reason is not None:
                # Cancelled by this server, not by its caller: whoever awaits
                # the turn (the JSON endpoint) answers with the reason.
                raise self.stop_reason from None
            raise
        except Exception:
            logger.exception("turn %s failed", self.turn_id)
            await self._fail(InternalError("the turn failed on the server"))
            raise
        finally:
            self.log.close()

    async def _run_and_commit(self) -> tuple[str, list[TurnEvent]]:
        """Runs the graph and commits; returns the committed body and the
        events the commit wrote that the clients here have not seen (an
        `interrupt`, then `done`). Raises the ApiError the client should see;
        `_execute` reports it and aborts the turn."""
        graph_task = asyncio.create_task(run_graph(self.claim, self.emit, deltas=self.deltas))
        keeper = LeaseKeeper(self.turn_id, graph_task)
        cancelled: list[bool] = []

        def stop_the_graph() -> None:
            # A cancel (POST …/cancel, on any process) aborted the turn in
            # the database and rang here.
            cancelled.append(True)
            graph_task.cancel()

        try:
            async with (
                wakeups.on_cancel(self.turn_id, stop_the_graph),
                asyncio.timeout(settings.AGENT_MODEL_TIMEOUT_SECONDS),
            ):
                outcome = await graph_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is None or current.cancelling() == 0:
                if cancelled:
                    raise TurnCancelled() from None
                if keeper.lost:
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
            await keeper.stop()
        # Once the commit is sent it runs to its end even if the caller is
        # cancelled: its answer (done, or stale/storage error) is the turn's.
        # It writes the events not yet written, an `interrupt` for each the
        # graph raised, and `done`, whose id is the next one: nothing else is
        # emitted from here on.
        staged = [self.log.stage("interrupt", interrupt) for interrupt in outcome.interrupts]
        pending = await self.log.take_unwritten()
        done_seq = self.log.next_seq
        commit = asyncio.ensure_future(
            db(turn_commit, turn_id=self.turn_id, outcome=outcome, pending=pending, done_seq=done_seq, claim=self.claim)
        )
        try:
            body = await asyncio.shield(commit)
            self._committed(outcome)
            return body, [*staged, TurnEvent(done_seq, "done", body)]
        except asyncio.CancelledError:
            await asyncio.wait([commit])
            if commit.cancelled() or commit.exception() is not None:
                self.log.give_back([e for e in pending if e not in staged])
                raise
            # The commit won the race with the cancel: the turn is committed,
            # and saying otherwise would be a lie (a retry replays it anyway).
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            self._committed(outcome)
            return commit.result(), [*staged, TurnEvent(done_seq, "done", commit.result())]
        except Exception:
            self.log.give_back([e for e in pending if e not in staged])  # the abort writes them (a repeat is skipped)
            raise

    def _committed(self, outcome) -> None:
        # The next turn of this session starts from here without a read.
        history.cache().put(self.claim.session_id, self.turn_id, outcome.conversation)


async def _abort_orphan(claiming: asyncio.Future) -> None:
    try:
        claimed = await claiming
    except Exception:
        return  # nothing was claimed
    if isinstance(claimed, Claim):
        await abort_claimed(claimed, TurnCancelled("the request went away before the turn started"))


async def start_turn(
    *,
    owner: str,
    key: str,
    request: dict[str, Any],
    idempotency_key: str | None,
    wait_if_busy: bool = True,
    deltas: bool = True,
    **claim_options: Any,
) -> Replay | TurnRun:
    """Claim the session and start the run, as one unit: if the caller is
    cancelled while the claim runs in its worker thread (the client went
    away), the claim may still commit, and the turn it claimed is aborted
    as soon as it does, so no pending turn holds the session with nothing
    running it. A busy session is waited for (AGENT_SESSION_WAIT_SECONDS)
    unless `wait_if_busy` is off; `claim_options` go to `turn_claim`.
    `deltas` off: the model's tokens are not streamed as `delta` events
    (a caller that waits for the whole answer); see `run_graph`."""
    shutdown.refuse_if_stopping()
    kwargs = dict(owner=owner, key=key, request=request, idempotency_key=idempotency_key, **claim_options)
    claiming = asyncio.ensure_future(
        session_wait.claim_when_free(turn_claim, running=running.running_task, **kwargs)
        if wait_if_busy
        else db(turn_claim, **kwargs)
    )
    try:
        claimed = await asyncio.shield(claiming)
    except asyncio.CancelledError:
        _in_background(_abort_orphan(claiming))
        raise
    if isinstance(claimed, Replay):
        return observability.turn_replayed(claimed, owner=owner, key=key)
    return observability.turn_started(TurnRun(claimed, deltas=deltas).start(), owner=owner, key=key)


def running_turns() -> list[running.RunningTurn]:
    """The turns this process is running now (agentsite.graceful_stop drains them)."""
    return running.running_turns()


async def await_turn(run: TurnRun) -> str:
    """The committed body. With AGENT_ON_DISCONNECT=continue a cancelled
    caller (client gone) leaves the turn running to its commit."""
    assert run.task is not None
    if settings.AGENT_ON_DISCONNECT == "continue":
        return await asyncio.shield(run.task)
    return await run.task
