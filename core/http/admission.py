"""Reads take turns on the event loop, so that a probe does not.

One event loop runs every request. Under a burst of reads (400 cheap GETs
at once) each of them runs a slice on every pass of the loop, and a health
probe arriving then waited several passes of 400 slices: seconds, as long as
the burst's own requests. Reads are admitted here a few at a time (twice the
database threads: more would only wait for a thread); the others wait
suspended, costing the loop nothing, and the probe's passes stay short.

Admitted: every GET and HEAD but the health probe, the metrics scrape, and
the endpoints that wait by design (`…/join`, `…/stream`); a read's place is
freed as soon as its response starts. Writes are never held here: a turn
waits for its model for seconds, and a place held meanwhile would cap the
turns in flight."""

from __future__ import annotations

import asyncio
import weakref

from core.asyncdb import db_threads
from core.http.edge import App, Message, Receive, Scope, Send

EXEMPT_PATHS = frozenset({"/api/health", "/metrics"})
WAITING_SUFFIXES = ("/join", "/stream")

_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def admitted(scope: Scope) -> bool:
    """Whether this request takes a place among the reads."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    path = scope.get("path", "")
    return path not in EXEMPT_PATHS and not path.rstrip("/").endswith(WAITING_SUFFIXES)


def places() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    semaphore = _by_loop.get(loop)
    if semaphore is None:
        semaphore = _by_loop[loop] = asyncio.Semaphore(2 * db_threads())
    return semaphore


def admit(app: App) -> App:
    """The ASGI app, with reads admitted a few at a time."""

    async def admitting(scope: Scope, receive: Receive, send: Send) -> None:
        if not admitted(scope):
            return await app(scope, receive, send)
        semaphore = places()
        await semaphore.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                semaphore.release()

        async def releasing_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            return await app(scope, receive, releasing_send)
        finally:
            release()

    return admitting
