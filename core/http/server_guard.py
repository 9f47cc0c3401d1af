"""Limits daphne does not have, applied inside daphne's Twisted protocol.

daphne reads a whole request body (into a temporary file, then into memory)
before the application sees a byte of it, and has no header or body read
timeout (docs/field-notes.md, "Learned while building"). An ASGI middleware comes too late for both, so the
server itself is given a request class and a channel that:

* refuse a declared `Content-Length` over the body limit with 413 as soon as
  the headers are in, and cut a chunked body at the limit (413) — nothing
  past the limit is stored anywhere;
* give each request a deadline for its headers and body
  (`AGENT_REQUEST_READ_TIMEOUT_SECONDS`): a client that trickles is answered
  408 and disconnected, however steadily it trickles;
* answer 431 to a header line or header block over 16 KB (Twisted closes
  the connection without a word);
* accept at most `AGENT_MAX_CONNECTIONS` connections per process (more are
  closed at once);
* write proper reason phrases (Twisted knows no "422", "429" or "431").

`install()` swaps these into daphne before its server starts; `agentsite.asgi`
calls it, which covers `daphne agentsite.asgi:application` and daphne's
`runserver` alike (both import the application before building the server).
These classes lean on Twisted internals, hence the pinned Twisted version.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING

from daphne import http_protocol, server
from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.web import http

from core.errors import ApiError
from core.http import errors
from core.http.edge import dialect_of

if TYPE_CHECKING:
    from typing_extensions import Buffer

logger = logging.getLogger(__name__)

# Twisted's own bound for a header line and for all of a request's headers.
MAX_HEADER_BYTES = 16_384


@dataclass
class Limits:
    max_body_bytes: int
    read_timeout_seconds: float
    max_connections: int


LIMITS = Limits(max_body_bytes=1_048_576, read_timeout_seconds=30.0, max_connections=500)


def reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return http.RESPONSES.get(status, b"Unknown Status")


def raw_error(status: int, code: str, message: str, path: bytes = b"") -> bytes:
    """A complete response in the error contract of `path`'s dialect (the
    API's where it has none; core.http.errors), written straight to the
    socket: used before any application has been created."""
    dialect = dialect_of(path.split(b"?", 1)[0].decode("latin-1")) or errors.API
    body = errors.render(ApiError.of(status, code, message), dialect).content()
    head = (
        f"HTTP/1.1 {status} {reason(status).decode()}\r\n"
        "Content-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    return head + body


class _Discard(io.BytesIO):
    def write(self, data: Buffer, /) -> int:  # a refused body is never stored
        return memoryview(data).nbytes


class GuardedRequest(http_protocol.WebRequest):
    _refused = False
    _received = 0

    def setResponseCode(self, code: int, message: bytes | None = None) -> None:
        super().setResponseCode(code, message if message is not None else reason(code))

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > LIMITS.max_body_bytes:
            self.content = _Discard()
            self._refuse()
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self._refused:
            return
        self._received += len(data)
        if self._received > LIMITS.max_body_bytes:
            self._refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version) -> None:
        if self._refused:
            return
        super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        self._refused = True
        self.channel.refuse(
            raw_error(
                413,
                "payload_too_large",
                f"the request body is over {LIMITS.max_body_bytes} bytes",
                # The request line is in; Request.path is set only later.
                getattr(self.channel, "_path", b""),
            )
        )


class GuardedChannel(http.HTTPChannel):
    """One connection: a read deadline per request, 431 for huge headers,
    and the factory's connection count."""

    _deadline = None
    _refused = False

    def connectionMade(self) -> None:
        super().connectionMade()
        self._arm()

    def lineReceived(self, line: bytes) -> None:
        if self._refused:
            return
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            self._too_large_headers()
            return
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        self._too_large_headers()

    def allContentReceived(self) -> None:
        self._disarm()
        super().allContentReceived()

    def requestDone(self, request) -> None:
        super().requestDone(request)
        # The next request on a kept-alive connection gets its own deadline.
        if self.transport is not None and not self.transport.disconnecting:
            self._arm()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._disarm()
        factory = self.factory
        if isinstance(factory, GuardedFactory):
            factory.open_connections -= 1
        super().connectionLost(reason)

    def refuse(self, response: bytes) -> None:
        """Answer before the request was read in full, and hang up."""
        if self._refused:
            return
        self._refused = True
        self._disarm()
        self._write(response)
        # Stops reading at once; the client's remaining bytes go nowhere.
        self.loseConnection()

    def _too_large_headers(self) -> None:
        self.refuse(
            raw_error(
                431,
                "headers_too_large",
                f"request headers are limited to {MAX_HEADER_BYTES} bytes",
                getattr(self, "_path", b""),
            )
        )

    def _write(self, data: bytes) -> None:
        """Straight to the socket. Called only while connected (bytes are
        coming in, or the read deadline fired, which connectionLost disarms)."""
        assert self.transport is not None
        # zope.interface declares methods without `self`: mypy, without the
        # mypy-zope plugin, takes `data` for it.
        self.transport.write(data)  # type: ignore[call-arg, misc]

    def _arm(self) -> None:
        self._disarm()
        if LIMITS.read_timeout_seconds:
            self._deadline = self.callLater(LIMITS.read_timeout_seconds, self._read_timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = None

    def _read_timed_out(self) -> None:
        self._deadline = None
        if self._handlingRequest or self._refused:
            return
        self._refused = True
        # A request begun and not finished gets a word; an idle connection
        # (nothing sent yet, or kept alive after a response) is just closed,
        # as clients expect of an idle keep-alive.
        if self.requests:
            self._write(
                raw_error(
                    408,
                    "request_timeout",
                    f"the request was not received within {LIMITS.read_timeout_seconds:g} s",
                    getattr(self, "_path", b""),
                )
            )
        # Twisted's idle-timeout path: close, and abort if the client does
        # not let go within abortTimeout.
        self.timeoutConnection()


def _guarded_protocol(factory: http.HTTPFactory):
    return http._GenericHTTPChannelProtocol(GuardedChannel())


class GuardedFactory(http_protocol.HTTPFactory):
    protocol = _guarded_protocol

    def __init__(self, server_) -> None:
        super().__init__(server_)
        self.open_connections = 0

    def buildProtocol(self, addr):
        if self.open_connections >= LIMITS.max_connections:
            logger.warning("refusing a connection from %s: %d open", addr, self.open_connections)
            return None
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = GuardedRequest
        self.open_connections += 1
        return protocol


def install(*, max_body_bytes: int, read_timeout_seconds: float, max_connections: int) -> None:
    """Make daphne's server (CLI and runserver) build guarded connections."""
    LIMITS.max_body_bytes = max_body_bytes
    LIMITS.read_timeout_seconds = read_timeout_seconds
    LIMITS.max_connections = max_connections
    server.HTTPFactory = GuardedFactory
