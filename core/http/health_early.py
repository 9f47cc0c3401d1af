"""`GET /api/health` on daphne's own port, answered at the outside of the
application from an answer a thread keeps fresh (docs/operations.md,
"Health").

Through the route, a probe took some ten passes of the event loop (the
router, Django's handler and its tasks, a hop to a probe thread and back,
the response); under a burst of 400 reads each pass lasts tens of
milliseconds, as the loop's thread shares the interpreter with the database
threads' work, and the probe took 350-580 ms at the 90th percentile. Here
it takes the passes a response cannot do without: its task's first step
answers.

`Refreshed` runs the answer (the health port's: its own connection, the
loop's heartbeat) on a thread of its own every `REFRESH_SECONDS`, while
probes keep coming (from the second within `KEEP_SECONDS`, until
`KEEP_SECONDS` after the last); an answer is served
only while it is at most `FRESH_SECONDS` old. Otherwise (the first probe
after a quiet spell, a probe that hangs) the request goes on to the route,
which probes then and there, as before."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from core.http.edge import App, Receive, Scope, Send, host_allowed
from core.http.health_port import Answer

logger = logging.getLogger(__name__)

PATH = "/api/health"
REFRESH_SECONDS = 0.5
FRESH_SECONDS = 1.0
KEEP_SECONDS = 60.0


class Refreshed:
    """`answer()`, run again and again on a thread, and its latest result."""

    def __init__(self, answer: Answer) -> None:
        self._answer = answer
        self._latest: tuple[float, int, dict[str, Any]] | None = None
        self._wanted_until = 0.0
        self._last_asked = -KEEP_SECONDS - 1.0
        self._wanted = threading.Event()
        self._stop = threading.Event()

    def start(self) -> Refreshed:
        threading.Thread(target=self._run, name="agentsite-health-refresh", daemon=True).start()
        return self

    def stop(self) -> None:
        """The thread ends after its current answer (tests; a server's ends
        with the process)."""
        self._stop.set()
        self._wanted.set()

    def fresh(self) -> tuple[int, dict[str, Any]] | None:
        """The latest answer if it is at most FRESH_SECONDS old, else None.
        A probe that follows another within KEEP_SECONDS keeps (or starts)
        the thread refreshing: a load balancer polls, while a lone probe (a
        deploy script's, a benchmark's at start) leaves the database alone."""
        now = time.monotonic()
        if now - self._last_asked <= KEEP_SECONDS:
            self._wanted_until = now + KEEP_SECONDS
            if not self._wanted.is_set():
                self._wanted.set()
        self._last_asked = now
        latest = self._latest
        if latest is None or now - latest[0] > FRESH_SECONDS:
            return None
        return latest[1], latest[2]

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wanted.wait()
            # Cleared before the deadline is read: a probe that comes in
            # between sets it again, and the wait returns at once.
            self._wanted.clear()
            while not self._stop.is_set() and time.monotonic() < self._wanted_until:
                # The answer's age counts from before it was asked.
                asked = time.monotonic()
                try:
                    status, body = self._answer()
                except Exception:  # the route answers meanwhile, as the answer ages
                    logger.exception("the health answer failed")
                else:
                    self._latest = (asked, status, body)
                self._stop.wait(REFRESH_SECONDS)


def _secure(scope: Scope) -> bool:
    """As Django's `request.is_secure()`: such a response carries HSTS,
    which the route's SecurityMiddleware adds."""
    if scope.get("scheme") == "https":
        return True
    proxy = settings.SECURE_PROXY_SSL_HEADER
    if not proxy:
        return False
    name = proxy[0].removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.split(b",")[0].strip().decode("latin-1") == proxy[1]
    return False


def answer_early(app: App, answer: Callable[[], tuple[int, dict[str, Any]] | None]) -> App:
    """`app`, with `GET /api/health` answered from `answer()` when that
    gives one ((status, body), or None to let the route answer). Inside
    the edge, which adds its security headers; only for a host the route
    would serve, and not on a secure request (the route adds HSTS)."""
    coop = settings.SECURE_CROSS_ORIGIN_OPENER_POLICY

    async def early(scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope.get("method") == "GET"
            and scope.get("path") == PATH
            and not (settings.SECURE_HSTS_SECONDS and _secure(scope))
            and host_allowed(scope)
        ):
            found = answer()
            if found is not None:
                status, body = found
                content = json.dumps(body).encode()
                headers = [
                    (b"content-type", b"application/json; charset=utf-8"),
                    (b"content-length", str(len(content)).encode()),
                ]
                if coop:
                    headers.append((b"cross-origin-opener-policy", coop.encode()))
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": content})
                return
        await app(scope, receive, send)

    return early
