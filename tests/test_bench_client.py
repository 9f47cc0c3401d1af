"""bench.client on a keep-alive connection the server closes: found closed
between requests, it is reopened; closed before the answer, a request safe
to send twice is sent once more, and anything else is a `ServerError`, not a
crash of the benchmark. The server is a tiny local one that closes its
connections as told."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from bench.client import Connection, ServerError

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"
EVENT = b"event: done\ndata: {}\n\n"
STREAM = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n"
    + f"{len(EVENT):x}\r\n".encode()
    + EVENT
    + b"\r\n0\r\n\r\n"
)


class Closing:
    """Answers requests, except that `plan` says, per request received in
    order, "answer" (and keep the connection), "answer-close" (answer, then
    close: an idle cut) or "drop" (close without answering)."""

    def __init__(self, plan: list[str]) -> None:
        self.plan = plan
        self.received: list[str] = []  # request lines, in the order they came
        self.connections = 0
        self.closed = asyncio.Event()  # set each time it closed a connection
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Closing:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                length = next((int(h.split(b":")[1]) for h in lines if h.lower().startswith(b"content-length")), 0)
                await reader.readexactly(length)
                line = head.split(b"\r\n")[0].decode()
                self.received.append(line)
                step = self.plan.pop(0) if self.plan else "answer"
                if step == "drop":
                    return
                writer.write(STREAM if "/stream " in line else OK)
                await writer.drain()
                if step == "answer-close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self.closed.set()


@pytest.fixture
async def connect() -> AsyncIterator:
    opened: list[Connection] = []

    async def open_(server: Closing) -> Connection:
        conn = await Connection("127.0.0.1", server.port, "key").open()
        opened.append(conn)
        return conn

    yield open_
    for conn in opened:
        await conn.close()


async def test_a_connection_closed_while_idle_is_reopened_for_the_next_request(connect):
    async with Closing(["answer-close"]) as server:
        conn = await connect(server)
        assert await conn.request("POST", "/turns", {"text": "one"}) == (200, b"{}")
        await asyncio.wait_for(server.closed.wait(), 10)
        # Not idempotent, yet safe: the closed connection is seen before sending.
        assert await conn.request("POST", "/turns", {"text": "two"}) == (200, b"{}")
        assert server.received == ["POST /turns HTTP/1.1", "POST /turns HTTP/1.1"]
        assert server.connections == 2


async def test_an_idempotent_request_dropped_unanswered_is_sent_once_more(connect):
    async with Closing(["drop"]) as server:
        conn = await connect(server)
        assert await conn.request("GET", "/health") == (200, b"{}")
        assert server.received == ["GET /health HTTP/1.1"] * 2
        assert server.connections == 2


async def test_a_post_with_an_idempotency_key_is_sent_once_more(connect):
    async with Closing(["drop"]) as server:
        conn = await connect(server)
        assert await conn.request("POST", "/turns", {"text": "hi"}, **{"Idempotency-Key": "k1"}) == (200, b"{}")
        assert server.received == ["POST /turns HTTP/1.1"] * 2


async def test_a_plain_post_dropped_unanswered_is_a_server_error_sent_once(connect):
    async with Closing(["drop"]) as server:
        conn = await connect(server)
        with pytest.raises(ServerError, match="POST /turns: the server closed the connection"):
            await conn.request("POST", "/turns", {"text": "hi"})
        assert server.received == ["POST /turns HTTP/1.1"]
        # The connection is usable again afterwards.
        assert await conn.request("GET", "/health") == (200, b"{}")


async def test_a_server_that_keeps_dropping_is_a_server_error_after_one_retry(connect):
    async with Closing(["drop", "drop", "drop"]) as server:
        conn = await connect(server)
        with pytest.raises(ServerError):
            await conn.request("GET", "/health")
        assert server.received == ["GET /health HTTP/1.1"] * 2


async def test_a_stream_on_a_connection_closed_while_idle_is_reopened(connect):
    async with Closing(["answer-close"]) as server:
        conn = await connect(server)
        assert (await conn.request("GET", "/health"))[0] == 200
        await asyncio.wait_for(server.closed.wait(), 10)
        status, _first, _done, names = await conn.stream("/turns/stream", {"text": "hi"})
        assert status == 200 and names == ["done"]
        assert server.connections == 2
