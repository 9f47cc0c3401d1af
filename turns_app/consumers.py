"""The chat stream, served by Channels consumers routed before Django.

`POST /api/sessions/{key}/turns/stream` runs a turn exactly like the JSON
chat endpoint (same body, auth, Idempotency-Key rules, and the runner's one
code path) and streams its events; `GET /api/sessions/{key}/turns/{turn_id}/stream`
re-attaches to a turn. Errors found before the stream starts are plain JSON
responses with the error contract and its status, so a client can tell them
apart by status code alone; once the stream started, a failure is an `error`
event and never a `done`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.conf import settings
from ninja import Schema
from pydantic import ValidationError

from agentsite.api import reject_nul
from agentsite.asyncdb import db
from agentsite.errors import (
    ApiError,
    InternalError,
    MalformedRequest,
    MethodNotAllowed,
    TurnInProgress,
    TurnNotFound,
    Unauthorized,
    ValidationFailed,
)
from sessions_app.models import ApiKey
from sessions_app.selectors import check_session_key
from sessions_app.services import api_key_authenticate
from turns_app import selectors
from turns_app.models import AgentTurn
from turns_app.protocol import Replay, check_idempotency_key
from turns_app.runner import TurnEvent, TurnRun, running_turn, start_turn
from turns_app.schemas import ChatIn
from turns_app.sse import Headers, SseConsumer

logger = logging.getLogger(__name__)

TERMINAL = frozenset({"done", "error"})

# A finished run this module streamed stays here a while, so a client that
# lost its stream near the end re-attaches with the ids it already has;
# storage can only rebuild a condensed stream, numbered afresh.
RETAIN_FINISHED_SECONDS = 120.0
_finished: dict[UUID, TurnRun] = {}


# --- request parsing: the JSON endpoint's rules -----------------------------


async def authenticate(headers: dict[str, str]) -> ApiKey:
    # As ninja's HttpBearer + agentsite.api.ApiKeyAuth read the header.
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        raise Unauthorized()
    return await db(api_key_authenticate, raw=token.strip())


class _ChatBody(Schema):
    # ninja validates a body parameter as a field of a wrapper model; doing
    # the same gives the same messages (e.g. for a body that is not an object).
    payload: ChatIn


def parse_chat(body: bytes) -> ChatIn:
    data: dict[str, Any] = {}
    if body:
        try:
            data["payload"] = json.loads(body)
        except ValueError:
            raise MalformedRequest() from None
        reject_nul(data["payload"])  # as the API's JsonParser does
    try:
        return _ChatBody.model_validate(data).payload
    except ValidationError as exc:
        # The message format of agentsite.api.on_validation_error.
        details = [
            {"loc": ["body", *map(str, e["loc"])], "message": e["msg"]} for e in exc.errors()
        ]
        where = ".".join(p for p in details[0]["loc"] if p not in {"body", "payload"}) or "request"
        raise ValidationFailed(f"{where}: {details[0]['message']}", details=details) from None


def parse_last_event_id(headers: dict[str, str]) -> int:
    raw = headers.get("last-event-id", "").strip() or "0"
    if not (raw.isascii() and raw.isdigit()):
        raise ValidationFailed("Last-Event-ID must be the id of an event of this turn")
    return int(raw)


# --- events -----------------------------------------------------------------------


def stored_events(turn: AgentTurn) -> list[TurnEvent]:
    """A finished turn's stream rebuilt from its row, with no model call:
    `turn`, `fields`, the whole reply as one `delta`, `done` (the stored
    body, verbatim) — or `turn`, `error` for an aborted turn. The order is
    the live stream's. Rejected field proposals are not stored, so `fields`
    carries the committed `field_changes` only."""
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
    return [
        TurnEvent(n, name, data if isinstance(data, str) else json.dumps(data, ensure_ascii=False))
        for n, (name, data) in enumerate(items, start=1)
    ]


def unseen_stored(events: list[TurnEvent], after: int) -> list[TurnEvent]:
    """Stored events past Last-Event-ID. An id beyond the stored stream came
    from the live one (which numbers every delta): the client lacks only the
    outcome, so it gets the terminal event alone."""
    rest = [e for e in events if e.id > after]
    if not rest and after > events[-1].id:
        rest = events[-1:]
    return rest


async def from_list(events: list[TurnEvent]) -> AsyncGenerator[TurnEvent, None]:
    for event in events:
        yield event


async def follow(run: TurnRun, after: int) -> AsyncGenerator[TurnEvent, None]:
    """The run's events after `after`, then live ones, up to its outcome. A
    run that ended without one (a bug in it) still ends with an `error`:
    a stream never just stops."""
    async with aclosing(run.subscribe(after)) as events:
        async for event in events:
            yield event
            if event.event in TERMINAL:
                return
    if not run.events or run.events[-1].event not in TERMINAL:
        error = json.dumps(InternalError().as_dict()["error"])
        yield TurnEvent(len(run.events) + 1, "error", error)


def watch(run: TurnRun) -> None:
    """Keep the run findable for a while after it ends, and mark its outcome
    as retrieved: the events carry it, so no one needs to await the task."""

    def finished(task: asyncio.Task) -> None:
        if not task.cancelled():
            task.exception()
        _finished[run.turn_id] = run
        asyncio.get_running_loop().call_later(
            RETAIN_FINISHED_SECONDS, _finished.pop, run.turn_id, None
        )

    assert run.task is not None
    run.task.add_done_callback(finished)


async def client_gone(run: TurnRun) -> None:
    """AGENT_ON_DISCONNECT: `continue` lets the turn run to its commit (a
    retry with the same Idempotency-Key then replays it); `cancel` aborts it
    and waits for the abort, so the session is free when the request ends."""
    if settings.AGENT_ON_DISCONNECT == "cancel":
        assert run.task is not None
        run.task.cancel()
        await asyncio.wait({run.task})


# --- the consumers ------------------------------------------------------------------


@dataclass
class Plan:
    """What to stream, decided before the response starts."""

    events: AsyncGenerator[TurnEvent, None]
    headers: Headers = ()
    # The turn this request started: the client's disconnect concerns it.
    owned: TurnRun | None = None


class _TurnStream(SseConsumer):
    """One request: checks, then a JSON error or the planned stream."""

    method: str

    async def handle(self, body: bytes) -> None:
        if self.scope["method"] != self.method:
            error = MethodNotAllowed(f"use {self.method}")
            return await self.send_error(error, headers=[(b"allow", self.method.encode())])
        try:
            plan = await self.plan(body, self.request_headers(), self.scope["url_route"]["kwargs"])
        except ApiError as error:
            return await self.send_error(error)
        except Exception:
            logger.exception("unhandled error on %s %s", self.scope["method"], self.scope["path"])
            return await self.send_error(InternalError())
        if plan is None:
            # Nothing left to send: 204 also stops an EventSource reconnecting.
            return await self.send_response(204, b"")
        if not await self.stream(plan.events, headers=plan.headers) and plan.owned:
            await client_gone(plan.owned)

    async def plan(
        self, body: bytes, headers: dict[str, str], route: dict[str, str]
    ) -> Plan | None:
        raise NotImplementedError


class TurnStreamConsumer(_TurnStream):
    """POST /api/sessions/{key}/turns/stream"""

    method = "POST"

    async def plan(
        self, body: bytes, headers: dict[str, str], route: dict[str, str]
    ) -> Plan | None:
        """Checks in the JSON endpoint's order: auth, body, session key,
        Idempotency-Key, then the claim (409s, 503)."""
        api_key = await authenticate(headers)
        payload = parse_chat(body)
        key = check_session_key(route["key"])
        started = await start_turn(
            owner=api_key.owner,
            key=key,
            request=payload.canonical(),
            idempotency_key=check_idempotency_key(headers.get("idempotency-key")),
        )
        if isinstance(started, Replay):
            turn = await db(selectors.turn_by_id, turn_id=started.turn_id)
            return Plan(from_list(stored_events(turn)), [(b"idempotent-replayed", b"true")])
        watch(started)
        return Plan(follow(started, 0), owned=started)


class TurnReattachConsumer(_TurnStream):
    """GET /api/sessions/{key}/turns/{turn_id}/stream. Follows a turn still
    running (or just finished) in this process from Last-Event-ID on;
    replays a finished one from storage; answers 409 `turn_in_progress` for
    a turn running in another process (its events live there). A follower's
    disconnect never cancels the turn: the request that started it owns it."""

    method = "GET"

    async def plan(
        self, body: bytes, headers: dict[str, str], route: dict[str, str]
    ) -> Plan | None:
        api_key = await authenticate(headers)
        key = check_session_key(route["key"])
        turn_id = _parse_turn_id(route["turn_id"])
        after = parse_last_event_id(headers)
        # Looked up before the row is read: a run that is not here now cannot
        # appear later, so "pending and not here" means another process.
        run = running_turn(turn_id) or _finished.get(turn_id)
        turn = await db(selectors.turn_of_owner, owner=api_key.owner, key=key, turn_id=turn_id)
        if run is not None:
            assert run.task is not None
            if not run.task.done():
                watch(run)
            elif not any(e.id > after for e in run.events):
                return None
            return Plan(follow(run, after))
        if turn.status == AgentTurn.Status.PENDING:
            raise TurnInProgress("the turn is running in another server process; retry later")
        rest = unseen_stored(stored_events(turn), after)
        return Plan(from_list(rest)) if rest else None


def _parse_turn_id(raw: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise TurnNotFound() from None
