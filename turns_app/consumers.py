"""The chat stream, served by Channels consumers routed before Django.

`POST /api/sessions/{key}/turns/stream` runs a turn exactly like the JSON
chat endpoint (same front door: auth, body, Idempotency-Key rules, and the
one execution path) and streams its events;
`GET /api/sessions/{key}/turns/{turn_id}/stream` re-attaches to a turn.
Errors found before the stream starts are plain JSON responses with the error
contract and its status, so a client can tell them apart by status code
alone; once the stream started, a failure is an `error` event, never `done`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from uuid import UUID

from django.conf import settings

from core.asyncdb import db
from core.errors import MethodNotAllowed, TurnNotFound, ValidationFailed
from core.http.bodies import validate_body
from core.http.sse import Headers, SseConsumer
from sessions_app.auth import authenticate
from sessions_app.selectors import check_session_key
from turns_app import selectors
from turns_app.events import event_log, follow_stored
from turns_app.execution import TurnRun, start_turn
from turns_app.schemas import ChatIn
from turns_app.services import check_idempotency_key
from turns_app.types import Replay, TurnEvent

# Longer ids are no id this server ever sent.
LAST_EVENT_ID_MAX_DIGITS = 18


def parse_last_event_id(headers: dict[str, str]) -> int:
    raw = headers.get("last-event-id", "").strip() or "0"
    if not (raw.isascii() and raw.isdigit() and len(raw) <= LAST_EVENT_ID_MAX_DIGITS):
        raise ValidationFailed("Last-Event-ID must be the id of an event of this turn")
    return int(raw)


async def client_gone(run: TurnRun) -> None:
    """AGENT_ON_DISCONNECT: `continue` lets the turn run to its commit (a
    retry with the same Idempotency-Key then replays it); `cancel` aborts it
    and waits for the abort, so the session is free when the request ends."""
    if settings.AGENT_ON_DISCONNECT == "cancel":
        assert run.task is not None
        run.task.cancel()
        await asyncio.wait({run.task})


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
            # channels-stubs' HTTPScope lacks the url_route URLRouter adds.
            route = self.scope["url_route"]["kwargs"]  # type: ignore[typeddict-item]
            plan = await self.plan(body, self.request_headers(), route)
        except Exception as error:  # rendered by the front door, unexpected ones logged there
            return await self.send_error(error)
        if plan is None:
            # Nothing left to send: 204 also stops an EventSource reconnecting.
            return await self.send_response(204, b"")
        if not await self.stream(plan.events, headers=plan.headers) and plan.owned:
            await client_gone(plan.owned)

    async def plan(self, body: bytes, headers: dict[str, str], route: dict[str, str]) -> Plan | None:
        raise NotImplementedError


class TurnStreamConsumer(_TurnStream):
    """POST /api/sessions/{key}/turns/stream"""

    method = "POST"

    async def plan(self, body: bytes, headers: dict[str, str], route: dict[str, str]) -> Plan | None:
        """Checks in the JSON endpoint's order: auth, body, session key,
        Idempotency-Key, then the claim (409s, 503)."""
        api_key = await authenticate(headers, self.scope)
        payload = validate_body(ChatIn, body)
        key = check_session_key(route["key"])
        started = await start_turn(
            owner=api_key.owner,
            key=key,
            request=payload.canonical(),
            idempotency_key=check_idempotency_key(headers.get("idempotency-key")),
        )
        if isinstance(started, Replay):
            # The stored stream, ids as they were live (compacted after
            # AGENT_EVENT_RETENTION_SECONDS to `turn` and `done`).
            return Plan(follow_stored(started.turn_id, 0), [(b"idempotent-replayed", b"true")])
        return Plan(started.log.follow(0), owned=started)


class TurnReattachConsumer(_TurnStream):
    """GET /api/sessions/{key}/turns/{turn_id}/stream: a turn's stream from
    Last-Event-ID on, from any process — live if the turn runs here, from
    the event log otherwise (woken when another process writes) — up to its
    final event. A follower's disconnect never cancels the turn: the request
    that started it owns it."""

    method = "GET"

    async def plan(self, body: bytes, headers: dict[str, str], route: dict[str, str]) -> Plan | None:
        api_key = await authenticate(headers, self.scope)
        key = check_session_key(route["key"])
        turn_id = _parse_turn_id(route["turn_id"])
        after = parse_last_event_id(headers)
        await db(selectors.turn_of_owner, owner=api_key.owner, key=key, turn_id=turn_id)
        log = event_log(turn_id)
        if log is not None:
            return Plan(log.follow(after))
        logged = await db(selectors.turn_events_after, turn_id=turn_id, after=after)
        if not logged.running and not logged.events and (logged.final is None or logged.final.id == after):
            return None  # the client saw the final event
        return Plan(follow_stored(turn_id, after))


def _parse_turn_id(raw: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise TurnNotFound() from None
