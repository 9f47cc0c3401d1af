"""Runs are turns. Starting a protocol run is starting a turn through the
same claim → run → commit path as /api/ (turns_app.execution): the run body
becomes a turn request (run_input.py), the thread's session is found (or
made), and the protocol's options — assistant, checkpoint, multitask
strategy, stream modes — become the turn's. Also: waiting for a run's
outcome. The Run objects are run_records.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.conf import settings

from core.asyncdb import db
from core.errors import SessionBusy, SessionExists, SessionNotFound, TurnCommitted, TurnNotFound
from core.http.errors import run_error
from graphs.runtime.registry import GraphShape, shape_for
from langgraph_app import run_config, stream, thread_access, threads
from langgraph_app.errors import not_supported, run_not_found, thread_busy, thread_not_found
from langgraph_app.ids import CheckpointRef
from langgraph_app.run_input import (
    ResumeNeedsThread,
    RunBody,
    breakpoints,
    check_options,
    command_request,
    input_request,
    wanted_ref,
)
from langgraph_app.schemas import thread_ttl
from sessions_app import selectors as sessions
from sessions_app import services as session_services
from sessions_app.auth import Principal
from turns_app.events import replay_from
from turns_app.execution import TurnRun, start_turn
from turns_app.services import check_idempotency_key, turn_cancel
from turns_app.types import FROM_STEP, REQUEST_OPTIONS, TERMINAL_EVENTS, Replay, StartFrom, TurnEvent, needs_pause

logger = logging.getLogger(__name__)

# An id past any event's: following from it yields only the final event.
ONLY_THE_END = 2**62
_background: set[asyncio.Future] = set()
# A turn request's key naming the checkpoint a run or a state update was
# asked to start from, when no `from` note names it (start_note).
AT_CHECKPOINT = "at"


@dataclass
class StartedRun:
    owner: str
    key: str  # the thread id
    run_id: UUID
    started: TurnRun | Replay
    modes: list[str]
    on_disconnect: str
    stateless: bool = False
    delete_after: bool = False
    cleanup: asyncio.Future | None = field(default=None, repr=False)

    @property
    def content_location(self) -> str:
        # Relative and without our /langgraph prefix: both SDKs append it to
        # the URL they were given.
        return f"/threads/{self.key}/runs/{self.run_id}"

    def headers(self, *, tail: str) -> list[tuple[bytes, bytes]]:
        """Where the run lives. A stateless run's thread is deleted when the
        run ends (on_completion delete), so no URL of it would outlive the
        answer: none is given. A kept one is a thread like any other."""
        if self.delete_after:
            return []
        return [
            (b"content-location", self.content_location.encode()),
            (b"location", f"{self.content_location}/{tail}".encode()),
        ]

    def events(self) -> AsyncIterator[TurnEvent]:
        if isinstance(self.started, Replay):
            return replay_from(self.started.turn_id, 0)
        return self.started.log.follow(0)

    async def client_gone(self) -> None:
        """on_disconnect: `cancel` aborts the run (and waits for the abort)."""
        if self.on_disconnect == "cancel" and isinstance(self.started, TurnRun):
            task = self.started.task
            assert task is not None  # start_turn answers a started run
            task.cancel()
            await asyncio.wait({task})

    def finish_in_background(self) -> None:
        """A stateless run's throwaway thread goes once the run is over."""
        if self.delete_after and self.cleanup is None:
            self.cleanup = asyncio.ensure_future(self._delete_when_over())
            _background.add(self.cleanup)
            self.cleanup.add_done_callback(_background.discard)

    async def _delete_when_over(self) -> None:
        if isinstance(self.started, TurnRun):
            assert self.started.task is not None  # start_turn answers a started run
            await asyncio.wait({self.started.task})
        try:
            await db(session_services.session_delete_for_owner, owner=self.owner, key=self.key)
        except Exception:
            logger.exception("could not delete the thread of stateless run %s", self.run_id)


@dataclass(frozen=True)
class StartPoint:
    """Where a run or a state update from a checkpoint starts: the committed
    state (`start_from`), the request's note of a checkpoint inside an
    earlier run it starts from (`origin`, turns_app.types.FROM_STEP), and,
    for a run's input checkpoint, that run's request (`again`): what a run
    given nothing there runs again (a regenerate), from the run's parent."""

    start_from: StartFrom
    origin: dict[str, Any] | None = None
    again: dict[str, Any] | None = None

    @property
    def parent(self) -> StartFrom:
        """The state just after the run the checkpoint is inside of."""
        return StartFrom(self.start_from.turn_id, self.start_from.version)


def start_point(*, owner: str, key: str, ref: CheckpointRef) -> StartPoint:
    """The committed state a checkpoint names (404 if the thread has none).
    A step inside a run is rebuilt from that run's record of it by the
    claim; its input checkpoint is the run's parent state, the input it
    still had to run dropped as LangGraph drops it (docs/agent-protocol.md,
    "Runs from a checkpoint")."""
    session = threads.thread_of(owner=owner, key=key)
    turns = threads.finished_turns(session)
    state = threads.find_state(threads.states_of(session, turns), ref)
    if state is None:
        raise SessionNotFound(f"Thread {key} has no checkpoint {ref.id}")
    if state.kind == "start":
        return StartPoint(StartFrom(None, 0))
    if state.kind == "now":
        return StartPoint(StartFrom(state.turn.id if state.turn else None, session.version))
    turn = state.turn
    assert turn is not None  # after, step and input states are their turn's
    if state.kind == "after":
        return StartPoint(StartFrom(turn.id, threads.version_after(turn)))
    parent = next((t for t in turns if t.id == turn.parent_id), None)
    record = state.record or {}
    step = int(record.get("step", -1))
    if state.kind == "step" and any("path" in t and "send" not in t for t in record.get("tasks") or ()):
        # A task neither pulled nor sent (a functional API call), or sent
        # before its run recorded Sends: its argument is not recorded.
        raise not_supported("a checkpoint with a task neither pulled nor sent (Send), inside a run")
    inside = StartFrom(
        parent.id if parent else None, threads.version_after(parent) if parent else 0, inside=turn.id, step=step
    )
    origin = {"turn_id": str(turn.id), "step": step}
    if state.kind == "step":
        return StartPoint(inside, origin)
    again = {k: turn.request[k] for k in ("text", "input", *REQUEST_OPTIONS) if k in turn.request}
    return StartPoint(inside, origin, again or None)


def start_note(ref: CheckpointRef | None, origin: dict[str, Any] | None) -> dict[str, Any]:
    """What a request records of the checkpoint it names: a step inside a
    run its `from` note (which the claim and history read), any other (the
    state after a run, the thread's current one, its start, a run's input
    checkpoint taken as its parent) its id, for the request's digest alone:
    an Idempotency-Key sent again with another checkpoint is then a
    conflict, not a replay (docs/turn-protocol.md, "Idempotency"). By the
    checkpoint named, not by where it is in the history, so a retry is the
    same request after its own commit moved the thread on. None named:
    nothing."""
    if origin is not None:
        return {FROM_STEP: origin}
    return {AT_CHECKPOINT: ref.id} if ref is not None else {}


def _stamp(assistant: run_config.RunAssistant) -> dict[str, str]:
    # agent-chat-ui lists threads by these (threads.search by metadata).
    return {"graph_id": assistant.graph, "assistant_id": assistant.assistant_id}


async def _ensure_thread(
    owner: str, key: str, assistant: run_config.RunAssistant, create: bool, metadata: dict[str, Any], where: Any
) -> None:
    """The thread exists matching the create_run filter (`where`), or is made
    (`create`) with the run's metadata; it carries the assistant's stamp. One
    already stamped takes no merge (docs/scale.md, "Round trips")."""
    stamp = _stamp(assistant)
    try:
        session = await db(sessions.session_get, owner=owner, key=key, where=where)
    except SessionNotFound:
        if not create:
            raise thread_not_found(key) from None
        try:
            ttl = thread_ttl(None, default=True)
            await db(
                session_services.session_create,
                owner=owner,
                key=key,
                graph=assistant.graph,
                metadata={**stamp, **metadata},
                **ttl,
            )
            return
        except SessionExists:
            # Made by a concurrent request (ours to run on now), or there
            # already but not the caller's by the filter.
            if where and not await db(sessions.session_matches, owner=owner, key=key, where=where):
                raise thread_not_found(key) from None
    else:
        if all(session.metadata.get(name) == value for name, value in stamp.items()):
            return
    await db(session_services.session_merge_metadata, owner=owner, key=key, metadata=stamp)


async def _cancel_running(owner: str, key: str) -> None:
    """multitask_strategy interrupt / rollback: the thread's running turn is
    cancelled first (on whichever process runs it). Nothing of a cancelled
    turn was committed, so both leave the thread where it was before it."""
    session = await db(sessions.session_get, owner=owner, key=key)
    if session.active_turn_id is None:
        return
    with contextlib.suppress(TurnCommitted, TurnNotFound):  # it finished first
        await db(turn_cancel, owner=owner, key=key, turn_id=session.active_turn_id)


async def start_run(
    *,
    principal: Principal,
    key: str | None,
    body: RunBody,
    idempotency_key: str | None,
    streamed: bool = True,
    thread_stream: bool = False,
) -> StartedRun:
    """Start a run on thread `key` (None: a stateless run on a throwaway
    thread). A run nobody streams (`streamed` off: wait) logs no stream
    modes unless the body names some: a `values` snapshot per step would be
    serialized and stored for no one. A `thread_stream` run (a thread
    command's) logs LangGraph's v3 protocol events (turns_app.thread_stream_parts).
    Every run starts here, so the create_run handler is asked here."""
    owner = principal.owner
    stateless = key is None
    if key is not None:
        sessions.check_session_key(key)
    metadata, where = await thread_access.run_allowed(principal, key, body)
    if metadata != (body.metadata or {}):
        body = body.model_copy(update={"metadata": metadata})
    assistant = run_config.system_run_assistant(body.assistant_id)
    if assistant is None:
        readable = await thread_access.assistant_readable(principal, body.assistant_id)
        assistant = await db(run_config.resolve, owner=owner, raw=body.assistant_id, where=readable)
    graph = assistant.graph
    check_options(body)
    idempotency_key = check_idempotency_key(idempotency_key)
    # Built at start-up (check_registry) and kept: read on the loop, no thread hop.
    shape = shape_for(graph)
    # The command wins over input (agent-chat-ui sends `input: {}` with it).
    command = command_request(body, shape)
    if stateless and command is not None and needs_pause(command):
        raise ResumeNeedsThread()
    ref = wanted_ref(body)
    modes = body.stream_modes if streamed or "stream_mode" in body.model_fields_set else []
    protocol: dict[str, Any] = {
        "assistant_id": body.assistant_id,
        "stream_mode": modes,
        **breakpoints(body, shape),
        **run_config.merged(assistant, body, shape.context_schema),
    }
    if body.stream_subgraphs:
        protocol["stream_subgraphs"] = True
    if thread_stream:
        protocol["thread_stream"] = True
    if body.metadata:
        protocol["metadata"] = body.metadata
    if key is None:
        key = str(uuid.uuid4())
        made = {**_stamp(assistant), **metadata}
        await db(session_services.session_create, owner=owner, key=key, graph=graph, metadata=made)
        try:
            return await _start(owner, key, body, idempotency_key, graph, ref, command, protocol, shape, stateless=True)
        except BaseException:
            await db(session_services.session_delete_for_owner, owner=owner, key=key)
            raise
    create = getattr(body, "if_not_exists", None) == "create"
    await _ensure_thread(owner, key, assistant, create, metadata, where)
    return await _start(owner, key, body, idempotency_key, graph, ref, command, protocol, shape, stateless=False)


async def _start(
    owner: str,
    key: str,
    body: RunBody,
    idempotency_key: str | None,
    graph: str,
    ref: CheckpointRef | None,
    command: dict[str, Any] | None,
    protocol: dict[str, Any],
    shape: GraphShape,
    *,
    stateless: bool,
) -> StartedRun:
    point = await db(start_point, owner=owner, key=key, ref=ref) if ref is not None else None
    start_from = point.start_from if point is not None else None
    origin = point.origin if point is not None else None
    if point is not None and point.again is not None and (command is not None or body.input is None):
        # A run's input checkpoint, given no new input: from that run's parent.
        start_from, origin = point.parent, None
    if command is not None:
        request = dict(command)
    elif point is not None and point.again is not None and body.input is None:
        request = dict(point.again)  # a regenerate: the run's request again
    elif body.input is None:
        # No input: go on from where the thread stopped (a breakpoint, a
        # state update with tasks left), or, with nothing to run, change nothing.
        request = {"input": None}
    else:
        request = input_request(body.input, shape)
    request.update(start_note(ref, origin))
    # The thread's key, which checkpoints streamed by the run name (turns_app.stream_parts).
    request["protocol"] = {**protocol, "thread_id": key}
    strategy = getattr(body, "multitask_strategy", "enqueue")
    if strategy in ("interrupt", "rollback"):
        await _cancel_running(owner, key)
    try:
        started = await start_turn(
            owner=owner,
            key=key,
            request=request,
            idempotency_key=idempotency_key,
            wait_if_busy=strategy != "reject",
            graph=graph,
            start_from=start_from,
            # Protocol streams carry LangGraph's own parts, never our deltas;
            # message chunks come when the client asks for messages-tuple.
            deltas=False,
        )
    except SessionBusy:
        if strategy == "reject":
            raise thread_busy() from None
        raise
    return StartedRun(
        owner=owner,
        key=key,
        run_id=started.turn_id,
        started=started,
        modes=protocol["stream_mode"],
        on_disconnect=body.on_disconnect or settings.AGENT_ON_DISCONNECT,
        stateless=stateless,
        delete_after=stateless and (getattr(body, "on_completion", None) or "delete") == "delete",
    )


# --- outcomes --------------------------------------------------------------------------------


async def final_event(run_id: UUID) -> TurnEvent:
    """The run's final event (done or error), once it has one, from any process."""
    events = replay_from(run_id, ONLY_THE_END)
    try:
        async for event in events:
            if event.event in TERMINAL_EVENTS:
                return event
    finally:
        await stream.close(events)
    raise run_not_found(run_id)


async def outcome(owner: str, key: str, run_id: UUID) -> dict[str, Any]:
    """A wait/join answer: the thread's state values after the run (with
    `__interrupt__` if it paused), or `{"__error__": {"error", "message"}}`
    if it failed (nothing committed)."""
    final = await final_event(run_id)
    told = json.loads(final.data)
    if final.event == "error":
        return {"__error__": run_error(told.get("code"), told.get("message"))}
    values = await db(threads.turn_values, owner=owner, key=key, turn_id=run_id)
    if told.get("status") == "interrupted":
        # As LangGraph's server answers a run that paused: what it waits for.
        values["__interrupt__"] = told.get("interrupts") or []
    return values


async def wait_for(run: StartedRun) -> dict[str, Any]:
    """`outcome`, for the request that started the run: if it goes away,
    on_disconnect decides whether the run goes on."""
    try:
        return await outcome(run.owner, run.key, run.run_id)
    except asyncio.CancelledError:
        await run.client_gone()
        raise
