"""A lean HTTP/1.1 client for the load: keep-alive connections over asyncio
streams, no parsing beyond what the answers need, so the load generator
costs little of the machine the server shares.

A kept-alive connection may be closed by the server between two requests
(its idle-connection cut, AGENT_REQUEST_READ_TIMEOUT_SECONDS; a connection
cap): one found closed is reopened before the next request, and one that
closes before any byte of the answer arrives is reopened and the request
sent once more, if sending it twice does no harm (an idempotent method, or
an Idempotency-Key). Anything else is a `ServerError`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

# Requests the server may receive twice without harm (RFC 9110, "Idempotent Methods").
IDEMPOTENT = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}


class ServerError(ConnectionError):
    """The server failed a request: closed the connection without an answer
    where a retry could not be made (or did not help)."""


class _ClosedBeforeAnswer(ConnectionError):
    pass


class Connection:
    def __init__(self, host: str, port: int, api_key: str) -> None:
        self.host, self.port, self.api_key = host, port, api_key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
            self.reader = self.writer = None

    def _request(self, method: str, path: str, body: Any, headers: dict[str, str]) -> bytes:
        payload = json.dumps(body).encode() if body is not None else b""
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Authorization: Bearer {self.api_key}",
            "Content-Type: application/json",
            f"Content-Length: {len(payload)}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload

    async def _head(self) -> tuple[int, dict[str, str]]:
        try:
            status_line = await self.reader.readline()
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise _ClosedBeforeAnswer(str(exc)) from exc
        if not status_line:
            raise _ClosedBeforeAnswer("the server closed the connection")
        status = int(status_line.split()[1])
        headers = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def _body(self, headers: dict[str, str]) -> bytes:
        if "content-length" in headers:
            return await self.reader.readexactly(int(headers["content-length"]))
        chunks: list[bytes] = []
        while True:
            size = int((await self.reader.readline()).strip() or b"0", 16)
            if size == 0:
                await self.reader.readline()
                return b"".join(chunks)
            chunks.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    def _closed(self) -> bool:
        return self.writer is None or self.writer.is_closing() or self.reader is None or self.reader.at_eof()

    async def _send(self, method: str, path: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
        """Send a request and read its status and headers, on a live connection."""
        # Two passes of the loop first, so that a close the server sent while
        # this connection sat idle is read before the request goes out on it
        # (in a pass, the socket's read callback runs after this task).
        for _ in range(2):
            await asyncio.sleep(0)
        if self._closed():
            await self.close()
            await self.open()
        request = self._request(method, path, body, headers)
        retry = method in IDEMPOTENT or any(k.lower() == "idempotency-key" for k in headers)
        for attempt in (1, 2):
            try:
                self.writer.write(request)
                return await self._head()
            except _ClosedBeforeAnswer as exc:
                await self.close()
                if attempt == 2 or not retry:
                    raise ServerError(f"{method} {path}: the server closed the connection without an answer") from exc
                await self.open()
        raise AssertionError("unreachable")

    async def request(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, bytes]:
        status, head = await self._send(method, path, body, headers)
        return status, await self._body(head)

    async def stream(self, path: str, body: Any) -> tuple[int, float | None, float, list[str]]:
        """POST an SSE request; (status, seconds to the first delta, seconds to
        the end, event names). Reads chunked frames as they come."""
        started = time.perf_counter()
        status, head = await self._send("POST", path, body, {})
        if status != 200:
            await self._body(head)
            return status, None, time.perf_counter() - started, []
        first_delta: float | None = None
        names: list[str] = []
        buffer = b""
        while True:
            size = int((await self.reader.readline()).strip() or b"0", 16)
            if size == 0:
                await self.reader.readline()
                return status, first_delta, time.perf_counter() - started, names
            buffer += await self.reader.readexactly(size)
            await self.reader.readexactly(2)
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                for line in frame.split(b"\n"):
                    if line.startswith(b"event: "):
                        names.append(line[7:].decode())
                        if names[-1] == "delta" and first_delta is None:
                            first_delta = time.perf_counter() - started
