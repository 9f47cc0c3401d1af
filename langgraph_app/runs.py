"""Runs are turns. Starting a protocol run is starting a turn through the
same claim → run → commit path as /api/ (turns_app.execution): the run body
becomes a turn request, the thread's session is found (or made), and the
protocol's options — assistant, checkpoint, multitask strategy — become the
claim's options. Also: the Run object, and waiting for a run's outcome.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.conf import settings
from pydantic import ValidationError

from core.asyncdb import db
from core.errors import (
    SessionBusy,
    SessionExists,
    SessionNotFound,
    TurnCommitted,
    TurnNotFound,
    ValidationFailed,
)
from core.http.bodies import validation_failed
from sessions_app import selectors as sessions
from sessions_app import services as session_services
from turns_app.events import replay_from
from turns_app.execution import TurnRun, start_turn
from turns_app.graph_step import REQUEST_OPTIONS
from langgraph_app import threads
from langgraph_app.errors import not_supported, run_error, run_not_found, thread_busy, thread_not_found
from langgraph_app.ids import CheckpointRef, assistant_id, graph_of_assistant, parse_checkpoint_id
from langgraph_app.schemas import RunCreateStateful, RunCreateStateless

RunBody = RunCreateStateful | RunCreateStateless
from turns_app.models import AgentTurn
from turns_app.schemas import ChatIn
from turns_app.services import check_idempotency_key, turn_cancel
from turns_app.types import TERMINAL_EVENTS, Replay, StartFrom, TurnEvent

logger = logging.getLogger(__name__)

# An id past any event's: following from it yields only the final event.
ONLY_THE_END = 2**62
HUMAN_ROLES = frozenset({"human", "user"})
_background: set[asyncio.Future] = set()


class ResumeNeedsThread(ValidationFailed):
    status = 400
    default_message = "You must provide a thread_id when resuming."


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
        return f"/runs/{self.run_id}" if self.stateless else f"/threads/{self.key}/runs/{self.run_id}"

    def headers(self, *, tail: str) -> list[tuple[bytes, bytes]]:
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
            self.started.task.cancel()
            await asyncio.wait({self.started.task})

    def finish_in_background(self) -> None:
        """A stateless run's throwaway thread goes once the run is over."""
        if self.delete_after and self.cleanup is None:
            self.cleanup = asyncio.ensure_future(self._delete_when_over())
            _background.add(self.cleanup)
            self.cleanup.add_done_callback(_background.discard)

    async def _delete_when_over(self) -> None:
        if isinstance(self.started, TurnRun):
            await asyncio.wait({self.started.task})
        try:
            await db(session_services.session_delete_for_owner, owner=self.owner, key=self.key)
        except Exception:
            logger.exception("could not delete the thread of stateless run %s", self.run_id)


# --- the run body -> a turn request ------------------------------------------------------------


def _text_of(content: Any) -> str:
    """A message's content: a string, or content blocks whose text blocks are
    joined with newlines. Other blocks (images, files) are refused."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationFailed("input.messages[0].content must be a string or a list of content blocks")
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise not_supported(f"a content block of type {str(kind)[:40]!r} (only text blocks are)")
    return "\n".join(parts)


def message_request(raw_input: Any) -> dict[str, Any]:
    """`{"messages": [one human message], <request options>}` as the turn
    request /api/ would make of the same text."""
    if not isinstance(raw_input, dict):
        raise ValidationFailed('input must be an object such as {"messages": [{"role": "user", "content": "…"}]}')
    unknown = sorted(set(raw_input) - {"messages", *REQUEST_OPTIONS})
    if unknown:
        raise not_supported(f"input.{unknown[0][:40]} (a run's input is the new message in input.messages)")
    messages = raw_input.get("messages")
    if isinstance(messages, (dict, str)):
        messages = [messages]
    if not isinstance(messages, list) or len(messages) != 1:
        raise ValidationFailed("input.messages must hold exactly one message: the user's new one")
    message = messages[0]
    if isinstance(message, str):
        text = message
    elif isinstance(message, dict) and (message.get("role") or message.get("type")) in HUMAN_ROLES:
        text = _text_of(message.get("content"))
    else:
        raise not_supported("an input message that is not the user's (role user / type human)")
    options = {k: raw_input[k] for k in REQUEST_OPTIONS if k in raw_input}
    try:
        chat = ChatIn.model_validate({"text": text, **options})
    except ValidationError as exc:
        raise validation_failed([{**e, "loc": ("input", *e["loc"])} for e in exc.errors()]) from None
    return chat.canonical()


def _check_options(body: RunBody) -> None:
    """Options we cannot honour are refused, never silently dropped."""
    if body.interrupt_before or body.interrupt_after:
        raise not_supported("interrupt_before / interrupt_after")
    if body.webhook:
        raise not_supported("webhook")
    if body.after_seconds:
        raise not_supported("after_seconds")
    if body.command is not None and (body.command.goto is not None or body.command.update is not None):
        raise not_supported("command.goto / command.update (command.resume is)")
    checkpoint = getattr(body, "checkpoint", None)
    if checkpoint is not None and checkpoint.checkpoint_ns:
        raise not_supported("a subgraph checkpoint (checkpoint_ns)")


def _wanted_ref(body: RunBody) -> CheckpointRef | None:
    raw = getattr(body, "checkpoint_id", None)
    checkpoint = getattr(body, "checkpoint", None)
    if checkpoint is not None and checkpoint.checkpoint_id:
        raw = checkpoint.checkpoint_id
    if raw is None:
        return None
    ref = parse_checkpoint_id(raw)
    if ref is None:
        raise ValidationFailed(f"checkpoint_id {raw[:80]!r} is not a checkpoint of this server")
    return ref


def start_point(*, owner: str, key: str, ref: CheckpointRef) -> tuple[StartFrom, dict[str, Any] | None]:
    """The committed state a checkpoint names, as a claim's `start_from`,
    and — for the state just before a turn's reply — that turn's request
    (a regenerate runs the same message again from the state before it)."""
    session = threads.thread_of(owner=owner, key=key)
    turns = threads.finished_turns(session)
    state = threads.find_state(threads.states_of(session, turns), ref)
    if state is None:
        raise SessionNotFound(f"Thread {key} has no checkpoint {ref.id}")
    if state.kind == "start":
        return StartFrom(None, 0), None
    if state.kind == "now":
        return StartFrom(state.turn.id if state.turn else None, session.version), None
    if state.kind == "after":
        return StartFrom(state.turn.id, state.turn.version), None
    turn = state.turn
    parent = next((t for t in turns if t.id == turn.parent_id), None)
    again = {k: turn.request[k] for k in ("text", *REQUEST_OPTIONS) if k in turn.request}
    return StartFrom(parent.id if parent else None, parent.version if parent else 0), again


def _stamp(graph: str) -> dict[str, str]:
    # agent-chat-ui lists threads by these (threads.search by metadata).
    return {"graph_id": graph, "assistant_id": assistant_id(graph)}


async def _ensure_thread(owner: str, key: str, graph: str, create: bool) -> None:
    try:
        await db(sessions.session_get, owner=owner, key=key)
    except SessionNotFound:
        if not create:
            raise thread_not_found(key) from None
        try:
            await db(session_services.session_create, owner=owner, key=key, graph=graph, metadata=_stamp(graph))
        except SessionExists:
            pass  # made by a concurrent request; it is ours to run on now
    await db(session_services.session_merge_metadata, owner=owner, key=key, metadata=_stamp(graph))


async def _cancel_running(owner: str, key: str) -> None:
    """multitask_strategy interrupt / rollback: the thread's running turn is
    cancelled first (on whichever process runs it). Nothing of a cancelled
    turn was committed, so both leave the thread where it was before it."""
    session = await db(sessions.session_get, owner=owner, key=key)
    if session.active_turn_id is None:
        return
    try:
        await db(turn_cancel, owner=owner, key=key, turn_id=session.active_turn_id)
    except (TurnCommitted, TurnNotFound):
        pass  # it finished first


async def start_run(
    *, owner: str, key: str | None, body: RunBody, idempotency_key: str | None, streamed: bool = True
) -> StartedRun:
    """Start a run on thread `key` (None: a stateless run on a throwaway
    thread). A run nobody streams (`streamed` off: wait) logs no stream
    modes unless the body names some: a `values` snapshot per step would be
    serialized and stored for no one."""
    stateless = key is None
    graph = graph_of_assistant(body.assistant_id)
    _check_options(body)
    idempotency_key = check_idempotency_key(idempotency_key)
    resume = body.command is not None and "resume" in body.command.model_fields_set
    if stateless and resume:
        raise ResumeNeedsThread()
    ref = _wanted_ref(body)
    modes = body.stream_modes if streamed or "stream_mode" in body.model_fields_set else []
    protocol = {"assistant_id": body.assistant_id, "stream_mode": modes}
    if body.metadata:
        protocol["metadata"] = body.metadata
    if stateless:
        key = str(uuid.uuid4())
        await db(session_services.session_create, owner=owner, key=key, graph=graph, metadata=_stamp(graph))
        try:
            return await _start(owner, key, body, idempotency_key, graph, ref, resume, protocol, stateless=True)
        except BaseException:
            await db(session_services.session_delete_for_owner, owner=owner, key=key)
            raise
    sessions.check_session_key(key)
    await _ensure_thread(owner, key, graph, create=body.if_not_exists == "create")
    return await _start(owner, key, body, idempotency_key, graph, ref, resume, protocol, stateless=False)


async def _start(
    owner: str,
    key: str,
    body: RunBody,
    idempotency_key: str | None,
    graph: str,
    ref: CheckpointRef | None,
    resume: bool,
    protocol: dict[str, Any],
    *,
    stateless: bool,
) -> StartedRun:
    start_from, again = await db(start_point, owner=owner, key=key, ref=ref) if ref is not None else (None, None)
    if resume:
        # The command wins over input (agent-chat-ui sends `input: {}` with it).
        request = {"resume": body.command.resume}
    elif again is not None:
        if body.input is not None:
            raise not_supported("input on a checkpoint before a reply (that is a regenerate: send no input)")
        request = again
    elif body.input is None:
        raise ValidationFailed('input is required: {"messages": [the new message]} (or command.resume)')
    else:
        request = message_request(body.input)
    request["protocol"] = protocol
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
        await events.aclose()
    raise run_not_found(run_id)


async def outcome(owner: str, key: str, run_id: UUID) -> dict[str, Any]:
    """A wait/join answer: the thread's state values after the run, or
    `{"__error__": {"error", "message"}}` if it failed (nothing committed)."""
    final = await final_event(run_id)
    if final.event == "error":
        told = json.loads(final.data)
        return {"__error__": run_error(told.get("code"), told.get("message"))}
    return await db(threads.turn_values, owner=owner, key=key, turn_id=run_id)


async def wait_for(run: StartedRun) -> dict[str, Any]:
    """`outcome`, for the request that started the run: if it goes away,
    on_disconnect decides whether the run goes on."""
    try:
        return await outcome(run.owner, run.key, run.run_id)
    except asyncio.CancelledError:
        await run.client_gone()
        raise


# --- the Run object ----------------------------------------------------------------------------

STATUS_OF_ERROR = {"turn_cancelled": "interrupted", "model_timeout": "timeout"}


def run_status(turn: AgentTurn) -> str:
    """LangGraph's run status: a run that paused on an interrupt succeeded
    (its thread is `interrupted`); a cancelled one is `interrupted`."""
    if turn.status == AgentTurn.Status.PENDING:
        return "running"
    if turn.status == AgentTurn.Status.ABORTED:
        return STATUS_OF_ERROR.get((turn.error or {}).get("code"), "error")
    return "success"


def run_json(key: str, turn: AgentTurn) -> dict[str, Any]:
    protocol = turn.request.get("protocol") or {}
    if "resume" in turn.request:
        kwargs_input, command = None, {"resume": turn.request["resume"]}
    else:
        kwargs_input, command = {"messages": [{"type": "human", "content": turn.request.get("text", "")}]}, None
    return {
        "run_id": str(turn.id),
        "thread_id": key,
        "assistant_id": protocol.get("assistant_id") or assistant_id(turn.graph),
        "created_at": threads.iso(turn.created_at),
        "updated_at": threads.iso(turn.finished_at or turn.created_at),
        "status": run_status(turn),
        "metadata": protocol.get("metadata") or {},
        "multitask_strategy": "enqueue",
        "kwargs": {
            "input": kwargs_input,
            "command": command,
            "stream_mode": protocol.get("stream_mode") or [],
            "config": {},
            "context": {},
        },
    }


def run_list(*, owner: str, key: str, limit: int, offset: int, status: str | None) -> list[dict[str, Any]]:
    """The thread's runs in its current epoch, newest first."""
    session = threads.thread_of(owner=owner, key=key)
    turns = AgentTurn.objects.filter(session=session, epoch=session.epoch).order_by("-number")
    out = [run_json(key, t) for t in turns.defer("messages", "result", "values")]
    if status is not None:
        out = [r for r in out if r["status"] == status]
    return out[offset : offset + limit]


def run_get(*, owner: str, key: str, run_id: UUID) -> dict[str, Any]:
    session = threads.thread_of(owner=owner, key=key)
    turn = AgentTurn.objects.filter(pk=run_id, session=session, epoch=session.epoch).first()
    if turn is None:
        raise run_not_found(run_id)
    return run_json(key, turn)


def run_cancel(*, owner: str, key: str, run_id: UUID) -> None:
    threads.thread_of(owner=owner, key=key)
    try:
        turn_cancel(owner=owner, key=key, turn_id=run_id)
    except TurnNotFound:
        raise run_not_found(run_id) from None


def parse_run_id(raw: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise run_not_found(raw[:80]) from None

