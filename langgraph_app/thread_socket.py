"""`WebSocket /langgraph/threads/{thread_id}/stream/events`: LangGraph's
thread-stream protocol over a WebSocket, as `client.threads.stream(...,
transport="websocket")` of `langgraph_sdk` speaks it (docs/agent-protocol.md,
"Thread streams"). Every text frame the client sends is a command
(`{"id", "method", "params"}`), answered by a frame of its own: the
commands of `POST /threads/{id}/commands` (thread_commands) and
`subscription.subscribe` / `subscription.unsubscribe`. The events of every
subscription come as frames too, each event once however many
subscriptions match it, from the same durable log as the SSE stream
(thread_events), so a client resumes on any process with `since`.

The handshake is authenticated like every request (`x-api-key` or
`Authorization: Bearer`), and the thread must be the caller's: otherwise the
upgrade is refused (HTTP 403, before any frame).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer

from core.asyncdb import db
from core.errors import ApiError
from core.http import errors
from langgraph_app import thread_commands, thread_events, threads
from langgraph_app.auth import authenticate
from langgraph_app.thread_access import check_thread
from sessions_app.auth import Principal
from sessions_app.selectors import check_session_key

logger = logging.getLogger(__name__)

# Subscriptions one socket may hold at once.
MAX_SUBSCRIPTIONS = 32


class ThreadStreamSocket(AsyncWebsocketConsumer):
    owner: str
    principal: Principal
    key: str
    graph: str

    async def connect(self) -> None:
        headers: dict[str, str] = {}
        for raw_name, raw_value in self.scope.get("headers", []):
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        try:
            api_key = await authenticate(headers, self.scope)
            self.key = check_session_key(self.scope["url_route"]["kwargs"]["thread_id"])
            await check_thread(api_key, "read", self.key)
            session = await db(threads.thread_of, owner=api_key.owner, key=self.key)
        except ApiError:
            # Refused before the upgrade: daphne answers the handshake 403.
            await self.close()
            return
        self.owner = api_key.owner
        self.principal = api_key
        self.graph = session.graph
        self.subscriptions: dict[str, thread_events.Subscription] = {}
        self.delivered = 0  # the last seq sent: LangGraph's applied_through_seq
        self.follower: asyncio.Task[None] | None = None
        await self.accept()

    async def disconnect(self, code: int) -> None:
        follower = getattr(self, "follower", None)
        if follower is not None:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        raw = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError):
            payload = None
            refused: dict[str, Any] | None = errors.command_error(
                None, "invalid_argument", "Protocol commands must be valid JSON.", "validation_error"
            )
        else:
            refused = thread_commands.check_envelope(payload)
        if refused is not None:
            return await self.send(text_data=json.dumps(refused))
        caller = thread_commands.Caller(principal=self.principal, delivered_seq=self.delivered)
        method = payload["method"]
        if method == "subscription.subscribe":
            answer = self.subscribe(payload, caller)
        elif method == "subscription.unsubscribe":
            answer = self.unsubscribe(payload, caller)
        else:
            answer = await thread_commands.run_command(caller, self.key, payload)
        await self.send(text_data=json.dumps(answer, ensure_ascii=False))

    def subscribe(self, payload: dict[str, Any], caller: thread_commands.Caller) -> dict[str, Any]:
        params = payload.get("params") or {}
        try:
            sub = thread_events.parse_subscription(params)
        except ApiError as exc:
            return errors.command_error(payload["id"], "invalid_argument", exc.message, "validation_error")
        if len(self.subscriptions) >= MAX_SUBSCRIPTIONS:
            message = f"a socket holds at most {MAX_SUBSCRIPTIONS} subscriptions"
            return errors.command_error(payload["id"], "invalid_argument", message, "validation_error")
        subscription_id = str(uuid.uuid4())
        self.subscriptions[subscription_id] = sub
        if self.follower is None:
            # The first subscription starts the socket's one follower of the
            # thread, at its `since` (none: the newest run's start); later
            # ones filter what that follower reads from then on.
            self.follower = asyncio.ensure_future(self.follow(sub.since))
        result = {"subscription_id": subscription_id, "replayed_events": 0}
        return thread_commands.success(payload["id"], result, caller)

    def unsubscribe(self, payload: dict[str, Any], caller: thread_commands.Caller) -> dict[str, Any]:
        subscription_id = (payload.get("params") or {}).get("subscription_id")
        if not isinstance(subscription_id, str):
            message = "subscription.unsubscribe requires a subscription_id"
            return errors.command_error(payload["id"], "invalid_argument", message, "validation_error")
        if self.subscriptions.pop(subscription_id, None) is None:
            message = f"unknown subscription {subscription_id[:80]!r}"
            return errors.command_error(payload["id"], "no_such_subscription", message)
        return thread_commands.success(payload["id"], {}, caller)

    async def follow(self, since: int | None) -> None:
        try:
            async for wire in thread_events.thread_wire_events(
                owner=self.owner, key=self.key, graph=self.graph, since=since
            ):
                wanted = self.subscriptions.values()
                if any(thread_events.matches(s, wire.method, wire.namespace, wire.data) for s in wanted):
                    await self.send(text_data=wire.text)
                    self.delivered = wire.seq
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("thread stream socket failed")
            with contextlib.suppress(Exception):
                await self.close(code=1011)
            return
        # The thread was deleted (its epoch changed): nothing more will come.
        with contextlib.suppress(Exception):
            await self.close(code=1000)


class RefusedSocket(AsyncWebsocketConsumer):
    """Any other WebSocket path: the upgrade is refused (HTTP 403)."""

    async def connect(self) -> None:
        await self.close()
