"""The protocol's SSE endpoints, served by Channels consumers routed before
Django (agentsite.routing), on the SSE transport /api/ uses:

    POST /langgraph/threads/{thread_id}/runs/stream   start a run, stream it
    POST /langgraph/runs/stream                       the same on a throwaway thread
    POST /langgraph/threads/{thread_id}/stream/events  the thread-stream protocol's events
    GET  /langgraph/threads/{thread_id}/runs/{run_id}/stream   join a run (Last-Event-ID)
    GET  /langgraph/threads/{thread_id}/stream         join the thread's stream (Last-Event-ID)

Errors found before the stream starts are JSON `{"detail", "code"}` with
their status; once it started, a failure is an `error` event.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import get_args
from urllib.parse import parse_qs

from core.asyncdb import db
from core.errors import ApiError, MethodNotAllowed, ValidationFailed
from core.http import errors
from core.http.bodies import parse_json, validate_body
from core.http.sse import Headers, SseConsumer
from langgraph_app import run_records, runs, thread_events, thread_join, threads
from langgraph_app.auth import authenticate
from langgraph_app.errors import run_not_found
from langgraph_app.params import TRUE
from langgraph_app.run_input import RunBody
from langgraph_app.schemas import RunCreateStateful, RunCreateStateless, StreamMode
from langgraph_app.stream import ProtocolEvent, parse_last_event_id, protocol_events, replays_whole
from langgraph_app.thread_access import check_thread
from sessions_app.selectors import check_session_key
from turns_app import selectors
from turns_app.events import replay_from
from turns_app.native_json import dumps
from turns_app.services import turn_cancel

# LangGraph's server sends a heartbeat comment this often; the JS SDK's idle
# watchdog reconnects after max(3 x interval, 6 s) of silence once armed.
HEARTBEAT_SECONDS = 5.0
STREAM_MODES = frozenset(get_args(StreamMode))


@dataclass
class Plan:
    events: AsyncGenerator[ProtocolEvent, None]
    headers: Headers = ()
    # Called with whether the client read the stream to its end.
    after: Callable[[bool], Awaitable[None]] | None = None


class _ProtocolStream(SseConsumer):
    method: str
    keepalive_seconds = HEARTBEAT_SECONDS
    dialect = errors.PROTOCOL

    def error_data(self, error: ApiError) -> str:
        return dumps(errors.run_error(str(error.code), error.message))

    async def handle(self, body: bytes) -> None:
        if self.scope["method"] != self.method:
            return await self.send_error(
                MethodNotAllowed(f"use {self.method}"), headers=[(b"allow", self.method.encode())]
            )
        try:
            # channels-stubs type an HTTP consumer's scope as asgiref's HTTPScope,
            # without the url_route that channels' URLRouter adds to it.
            route = self.scope["url_route"]["kwargs"]  # type: ignore[typeddict-item]
            plan = await self.plan(body, self.request_headers(), route)
        except Exception as error:  # rendered by the front door, unexpected ones logged there
            return await self.send_error(error)
        finished = await self.stream(plan.events, headers=plan.headers)
        if plan.after is not None:
            await plan.after(finished)

    def query(self) -> dict[str, list[str]]:
        return parse_qs(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)

    async def plan(self, body: bytes, headers: dict[str, str], route: dict[str, str]) -> Plan:
        raise NotImplementedError


class RunStreamConsumer(_ProtocolStream):
    """POST /langgraph/threads/{thread_id}/runs/stream and POST /langgraph/runs/stream"""

    method = "POST"

    async def plan(self, body: bytes, headers: dict[str, str], route: dict[str, str]) -> Plan:
        api_key = await authenticate(headers, self.scope)
        key = route.get("thread_id")
        payload: RunBody = (
            validate_body(RunCreateStateless, body) if key is None else validate_body(RunCreateStateful, body)
        )
        run = await runs.start_run(
            principal=api_key, key=key, body=payload, idempotency_key=headers.get("idempotency-key")
        )
        run.finish_in_background()

        async def after(finished: bool) -> None:
            if not finished:
                await run.client_gone()

        events = protocol_events(run.events(), run.run_id, run.modes)
        return Plan(events, run.headers(tail="stream"), after)


def stream_modes_of(values: list[str]) -> list[str] | None:
    """`stream_mode` as the SDKs send it in a query string: repeated keys
    (Python), a JSON array (JS) or empty (None: the run's own modes)."""
    modes: list[str] = []
    for value in values:
        value = value.strip()
        if not value:
            continue
        if value.startswith("["):
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
                raise ValidationFailed("stream_mode must be a stream mode or a JSON array of them") from None
            if not isinstance(parsed, list) or not all(isinstance(m, str) for m in parsed):
                raise ValidationFailed("stream_mode must be a stream mode or a JSON array of them")
            modes += parsed
        else:
            modes.append(value)
    unknown = [m for m in modes if m not in STREAM_MODES]
    if unknown:
        raise ValidationFailed(f"stream_mode: {unknown[0][:40]!r} is not a stream mode")
    return modes or None


class JoinStreamConsumer(_ProtocolStream):
    """GET /langgraph/threads/{thread_id}/runs/{run_id}/stream: a run's
    stream after Last-Event-ID (-1 or none: from the start), live or from
    the log, on any process, up to `end`/`error`."""

    method = "GET"

    async def plan(self, body: bytes, headers: dict[str, str], route: dict[str, str]) -> Plan:
        api_key = await authenticate(headers, self.scope)
        key = check_session_key(route["thread_id"])
        run_id = run_records.parse_run_id(route["run_id"])
        after = parse_last_event_id(headers.get("last-event-id"))
        query = self.query()
        asked = stream_modes_of(query.get("stream_mode", []))
        cancel_on_disconnect = (query.get("cancel_on_disconnect") or [""])[-1].strip().lower() in TRUE
        await check_thread(api_key, "read", key)
        try:
            turn = await db(selectors.turn_of_owner, owner=api_key.owner, key=key, turn_id=run_id)
        except ApiError:
            raise run_not_found(run_id) from None
        modes = asked or (turn.request.get("protocol") or {}).get("stream_mode") or ["values"]

        async def after_stream(finished: bool) -> None:
            if not finished and cancel_on_disconnect:
                with contextlib.suppress(ApiError):  # it finished first
                    await db(turn_cancel, owner=api_key.owner, key=key, turn_id=run_id)

        if replays_whole(modes):
            events = protocol_events(replay_from(run_id, 0), run_id, modes, sent=after)
        else:
            events = protocol_events(replay_from(run_id, after), run_id, modes)
        return Plan(events, after=after_stream)


class ThreadEventsConsumer(_ProtocolStream):
    """POST /langgraph/threads/{thread_id}/stream/events: the thread's
    protocol events (thread_events), filtered by the body's channels,
    namespaces and depth, after its `since`, for as long as the client stays."""

    method = "POST"

    async def plan(self, body: bytes, headers: dict[str, str], route: dict[str, str]) -> Plan:
        api_key = await authenticate(headers, self.scope)
        key = check_session_key(route["thread_id"])
        sub = thread_events.parse_subscription(parse_json(body) if body else None)
        await check_thread(api_key, "read", key)
        session = await db(threads.thread_of, owner=api_key.owner, key=key)
        return Plan(thread_events.follow_thread(owner=api_key.owner, key=key, graph=session.graph, sub=sub))


class ThreadJoinConsumer(_ProtocolStream):
    """GET /langgraph/threads/{thread_id}/stream: join the thread's stream
    (thread_join), after Last-Event-ID, for as long as the client stays."""

    method = "GET"

    async def plan(self, body: bytes, headers: dict[str, str], route: dict[str, str]) -> Plan:
        api_key = await authenticate(headers, self.scope)
        key = check_session_key(route["thread_id"])
        modes = thread_join.parse_modes(self.query())
        since = thread_join.parse_since(headers.get("last-event-id"))
        await check_thread(api_key, "read", key)
        await db(threads.thread_of, owner=api_key.owner, key=key)
        return Plan(thread_join.join_thread(owner=api_key.owner, key=key, modes=modes, since=since))
