"""The health port: `GET /api/health` on a listener thread of its own
(AGENT_HEALTH_PORT), beside daphne's port (docs/operations.md, "Health").

Everything on daphne's port shares one event loop. Under a burst of 400
requests, or 400 open streams, a probe there waits for the loop to get
through its passes, each a slice of every request in flight: tens of
milliseconds at best, seconds before admission control. Here nothing of
that is in the way: the thread accepts, reads one request and answers it,
one connection at a time (a load balancer polls one at a time), and the
answer's database probe runs on the thread itself, on a connection of its
own (turns_app.health).

What this thread cannot see by itself is the loop: a loop wedged by a
step that never yields would serve nothing while this answered 200. So the
loop beats (`Heartbeat`, a timer on it every half second), and the answer
says 503 when the last beat is too old.

Stdlib's `http.server` parses the request (its bounds on the request line
and the header count); each connection has `READ_SECONDS` to send it, so a
client that trickles gives the thread back soon. Errors speak the API's
contract (core.http.errors)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import urlsplit

from core.errors import ApiError, ErrorCode
from core.http import errors

Answer = Callable[[], tuple[int, dict[str, Any]]]

PATHS = frozenset({"/api/health", "/api/health/"})
READ_SECONDS = 2.0
BEAT_SECONDS = 0.5
_STATUS_CODES = {
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    408: ErrorCode.REQUEST_TIMEOUT,
    431: ErrorCode.HEADERS_TOO_LARGE,
}


class Heartbeat:
    """When the event loop last ran a timer. Started on the loop
    (`start`, from the loop's thread); read from any thread."""

    def __init__(self) -> None:
        self.last: float | None = None

    def start(self, call_later: Callable[[float, Callable[[], None]], Any]) -> None:
        def beat() -> None:
            self.last = time.monotonic()
            call_later(BEAT_SECONDS, beat)

        beat()

    def stalled_for(self) -> float:
        """Seconds since the last beat beyond the expected interval; 0 while
        the loop keeps time (or before it started: nothing to say yet)."""
        if self.last is None:
            return 0.0
        return max(0.0, time.monotonic() - self.last - BEAT_SECONDS)


class _Handler(BaseHTTPRequestHandler):
    server: HealthServer
    timeout = READ_SECONDS
    server_version = "agentsite-health"

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def _answer(self, *, with_body: bool) -> None:
        if urlsplit(self.path).path not in PATHS:
            self.send_error(404)
            return
        status, body = self.server.answer()
        self._send(status, json.dumps(body).encode(), with_body=with_body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server's own errors (400, 414, 431, 501 for another method)
        # and the 404 above, in the API's error contract.
        status = 405 if code == 501 else code
        error_code = _STATUS_CODES.get(status, ErrorCode.MALFORMED_REQUEST)
        text = "only GET and HEAD are served here" if status == 405 else message or "no such endpoint"
        rendered = errors.render(ApiError.of(status, error_code, text))
        self.close_connection = True
        self._send(status, rendered.content(), with_body=self.command != "HEAD")

    def _send(self, status: int, body: bytes, *, with_body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # A load balancer polls every few seconds: no line per probe.
        pass


class HealthServer(HTTPServer):
    def __init__(self, address: tuple[str, int], answer: Answer) -> None:
        self.answer = answer
        super().__init__(address, _Handler)


def serve(host: str, port: int, answer: Answer) -> HealthServer:
    """Listen on host:port (raises OSError if it cannot) and answer there,
    on a daemon thread, until the process exits."""
    server = HealthServer((host, port), answer)
    threading.Thread(target=server.serve_forever, name="agentsite-health", daemon=True).start()
    return server
