"""Server-Sent Events over a Channels `AsyncHttpConsumer`: the framing, the
headers, keep-alive comments, and noticing that the client went away."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Iterable
from typing import Protocol

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from django.conf import settings

from core.errors import ApiError, PayloadTooLarge
from core.http import errors

logger = logging.getLogger(__name__)

# While the model is silent a comment goes out this often, so proxies and
# clients do not time the connection out. Tests shrink it.
KEEPALIVE_SECONDS = 15.0
# A comment line with no blank line after it: the spec ignores it either way,
# but httpx-sse (0.4.3) dispatches an empty event for a blank line once an
# `id:` was seen, so ending the comment with "\n\n" would hand such clients
# an event with no name and no data. Sent only between frames.
KEEPALIVE = b": keep-alive\n"

Headers = Iterable[tuple[bytes, bytes]]


class Event(Protocol):
    # Read-only members, so frozen dataclasses (TurnEvent, ProtocolEvent) are events.
    @property
    def id(self) -> int: ...
    @property
    def event(self) -> str: ...
    @property
    def data(self) -> str: ...  # JSON text


SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    # nginx buffers proxied responses unless told not to.
    (b"x-accel-buffering", b"no"),
]


def frame(event: Event) -> bytes:
    # Event data is JSON text, which has no raw line breaks: one `data:` line.
    return f"id: {event.id}\nevent: {event.event}\ndata: {event.data}\n\n".encode()


def broken_frame(data: str) -> bytes:
    """The `error` event of a stream that broke while it was sent: no `id`,
    so a client resuming with Last-Event-ID resumes after the last event it
    really got."""
    return f"event: error\ndata: {data}\n\n".encode()


class SseConsumer(AsyncHttpConsumer):
    """Channels dispatches one message at a time, so while `handle()` runs
    nobody reads the receive channel and the stock consumer never sees
    `http.disconnect` (channels #1249). `stream()` reads it itself, racing
    the events against it."""

    # Seconds between keep-alive comments; None: KEEPALIVE_SECONDS.
    keepalive_seconds: float | None = None
    # How errors answered before the stream starts are worded.
    dialect: errors.Dialect = errors.API

    async def __call__(self, scope, receive, send):
        self._receive = receive
        self._body_size = 0
        await super().__call__(scope, receive, send)

    async def dispatch(self, message):
        # Channels' dispatch runs close_old_connections in a worker thread
        # before every message (the request, each body chunk): a thread hop
        # for connections these consumers never hold — their database work
        # goes through core.asyncdb's own threads (docs/scale.md, "CPU").
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def http_request(self, message):
        # Django caps request bodies (DATA_UPLOAD_MAX_MEMORY_SIZE); a consumer
        # bypasses that, so the cap is applied here before buffering more.
        self._body_size += len(message.get("body", b""))
        if self._body_size > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            await self.send_error(PayloadTooLarge())
            await self.disconnect()
            raise StopConsumer()
        await super().http_request(message)

    def request_headers(self) -> dict[str, str]:
        """Lower-case names; repeated headers joined with "," as Django does."""
        headers: dict[str, str] = {}
        for raw_name, raw_value in self.scope.get("headers", []):
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        return headers

    async def send_error(self, error: BaseException, *, headers: Headers = ()) -> None:
        """A plain JSON response in the consumer's dialect, through the front
        door (core.http.errors): for errors found before the stream started."""
        where = f"{self.scope.get('method')} {self.scope.get('path')}"
        rendered = errors.render(error, self.dialect, where=where)
        await self.send_response(rendered.status, rendered.content(), headers=[*rendered.asgi_headers(), *headers])

    def error_data(self, error: ApiError) -> str:
        """The data of the `error` event that ends a stream which broke, in
        the consumer's dialect."""
        return errors.event_data(error)

    async def stream(self, events: AsyncGenerator[Event, None], *, headers: Headers = ()) -> bool:
        """Sends the events as they come. True once all were sent; False if
        the client disconnected first (the rest are dropped)."""
        await self.send_headers(status=200, headers=[*SSE_HEADERS, *headers])
        pump = asyncio.ensure_future(self._pump(events))
        gone = asyncio.ensure_future(self._disconnected())
        try:
            await asyncio.wait({pump, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, gone):
                task.cancel()
            await asyncio.wait({pump, gone})
        if pump.cancelled():
            return False
        pump.result()
        await self.send_body(b"")
        return True

    async def _pump(self, events: AsyncGenerator[Event, None]) -> None:
        # The pending `anext` survives a keep-alive timeout: cancelling it
        # would close the generator (and its subscription) mid-stream.
        pending = asyncio.ensure_future(anext(events))
        try:
            while True:
                interval = KEEPALIVE_SECONDS if self.keepalive_seconds is None else self.keepalive_seconds
                done, _ = await asyncio.wait({pending}, timeout=interval)
                if not done:
                    await self.send_body(KEEPALIVE, more_body=True)
                    continue
                try:
                    event = pending.result()
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    # The response has started: a stream never just stops (a
                    # cut chunked body), it ends with an `error` and a clean
                    # end of the response. Unexpected errors are logged there.
                    where = f"{self.scope.get('method')} {self.scope.get('path')}"
                    error = errors.error_of(exc, where=where)
                    await self.send_body(broken_frame(self.error_data(error)), more_body=True)
                    return
                await self.send_body(frame(event), more_body=True)
                pending = asyncio.ensure_future(anext(events))
        finally:
            if not pending.done():
                pending.cancel()
                await asyncio.wait({pending})
            try:
                await events.aclose()
            except Exception:
                # Everything was sent; the response still ends cleanly.
                logger.exception("closing the events of %s failed", self.scope.get("path"))

    async def _disconnected(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
