"""Hostile clients against a real server process (daphne, and daphne's
runserver), over real sockets: oversized uploads with memory measured as
the server's RSS, slow clients, too many connections, huge headers, and the
status lines the server writes."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

MB = 1 << 20


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = rss_bytes(pid)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, rss_bytes(self.pid))
            time.sleep(0.02)


def connect(server, timeout: float = 10) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    return sock


def read_all(sock: socket.socket) -> bytes:
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except OSError:
        pass
    return out


def status_line(raw: bytes) -> str:
    return raw.split(b"\r\n", 1)[0].decode("latin-1")


def chunked_upload(server, path: str, total: int, chunk: int = MB) -> tuple[int, bytes]:
    """Sends up to `total` bytes as a chunked body (no Content-Length, no
    API key). Returns (bytes the server took before it stopped reading, response)."""
    sock = connect(server)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n".encode()
    )
    piece = f"{chunk:x}\r\n".encode() + b"x" * chunk + b"\r\n"
    sent = 0
    try:
        while sent < total:
            sock.sendall(piece)
            sent += chunk
        sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the server hung up: what we wanted
    response = read_all(sock)
    sock.close()
    return sent, response


@pytest.mark.parametrize("kind", ["daphne", "runserver"])
def test_oversized_uploads_keep_memory_bounded(servers, kind):
    """8 parallel 48 MB uploads without an API key to the SSE
    endpoint, the JSON API and the admin; a declared Content-Length over the
    limit is refused before the body is read. The server's RSS must not grow
    with the uploads."""
    server = servers(kind)
    baseline = rss_bytes(server.process.pid)
    sampler = RssSampler(server.process.pid)
    sampler.start()
    paths = ["/api/sessions/s1/turns/stream", "/api/sessions", "/admin/login/", "/"] * 2
    results: list[tuple[int, bytes]] = [(0, b"")] * len(paths)

    def upload(i: int) -> None:
        results[i] = chunked_upload(server, paths[i], 48 * MB)

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(len(paths))]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    elapsed = time.monotonic() - started

    # Declared: refused at the headers, before a byte of body.
    sock = connect(server)
    sock.sendall(
        b"POST /api/sessions/s1/turns/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 400000000\r\n\r\n"
    )
    declared = read_all(sock)
    sock.close()
    sampler.stop.set()
    sampler.join()

    growth = sampler.peak - baseline
    print(
        f"\n{kind}: RSS {baseline / MB:.0f} MB -> peak {sampler.peak / MB:.0f} MB "
        f"(+{growth / MB:.0f} MB) for {len(paths)} x 48 MB uploads in {elapsed:.1f} s"
    )
    assert status_line(declared).startswith("HTTP/1.1 413 "), declared[:300]
    assert b'"payload_too_large"' in declared
    for sent, response in results:
        # Cut near the 1 MiB limit (socket buffers hold a few MB in flight).
        assert sent < 48 * MB, "the whole upload was accepted"
        if response:
            assert status_line(response).startswith("HTTP/1.1 413 "), response[:300]
    assert growth < 40 * MB, f"RSS grew by {growth / MB:.0f} MB"
    assert httpx.get(f"{server.url}/api/health", timeout=5).status_code == 200


def test_slow_clients_are_cut(servers):
    """Partial headers and trickling bodies are answered
    408 and disconnected once the read deadline passes, however steadily
    they trickle; a normal request meanwhile is served."""
    server = servers(AGENT_REQUEST_READ_TIMEOUT_SECONDS="2")
    partial, trickling = [], []
    idle = connect(server, timeout=15)
    for _ in range(30):
        sock = connect(server, timeout=15)
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        partial.append(sock)
    for _ in range(10):
        sock = connect(server, timeout=15)
        sock.sendall(
            b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        trickling.append(sock)
    started = time.monotonic()
    # Trickle a byte per socket every 0.5 s: an idle timeout would never fire.
    closed_at: dict[int, float] = {}
    while time.monotonic() - started < 8 and len(closed_at) < len(partial) + len(trickling):
        for i, sock in enumerate(partial + trickling):
            if i in closed_at:
                continue
            try:
                sock.sendall(b"a")
            except OSError:
                closed_at[i] = time.monotonic() - started
        assert httpx.get(f"{server.url}/api/health", timeout=2).status_code == 200
        time.sleep(0.5)
    answers = [read_all(sock) for sock in partial + trickling]
    # A connection that never started a request is closed without a word
    # (recv raises a timeout if it is still open).
    idle.settimeout(5)
    assert idle.recv(100) == b""
    idle.close()
    for sock in partial + trickling:
        sock.close()
    print(
        f"\nslow clients: {len(closed_at)} of {len(answers)} cut, last after {max(closed_at.values(), default=0):.1f} s"
    )
    assert len(closed_at) == len(answers), "some slow clients are still connected"
    assert max(closed_at.values()) < 6
    for answer in answers:
        assert status_line(answer).startswith("HTTP/1.1 408 "), answer[:200]
        assert b'"request_timeout"' in answer


def test_connections_per_process_are_bounded(servers):
    server = servers(AGENT_MAX_CONNECTIONS="20", AGENT_REQUEST_READ_TIMEOUT_SECONDS="30")
    held = [connect(server) for _ in range(20)]
    time.sleep(0.3)
    extra = connect(server, timeout=5)
    # The 21st is closed by the server at once, without a response.
    assert read_all(extra) == b""
    extra.close()
    for sock in held:
        sock.close()
    time.sleep(0.3)
    # Closed connections give their places back.
    assert httpx.get(f"{server.url}/api/health", timeout=5).status_code == 200


def test_huge_headers_are_431_and_status_lines_have_reasons(servers, alice):
    """Headers over the limit are answered 431 `headers_too_large`, and status
    lines carry their reason phrases (docs/api.md, "Limits and hostile clients")."""
    server = servers()
    for headers in (
        b"X-Big: " + b"a" * 20_000 + b"\r\n",
        b"".join(b"X-%d: %s\r\n" % (i, b"b" * 900) for i in range(20)),
    ):
        sock = connect(server)
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n")
        answer = read_all(sock)
        sock.close()
        assert status_line(answer) == "HTTP/1.1 431 Request Header Fields Too Large", answer[:200]
        assert b'"headers_too_large"' in answer
    body = b'{"key": "a b"}'
    sock = connect(server)
    sock.sendall(
        b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Authorization: Bearer " + alice.encode() + b"\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    answer = read_all(sock)
    sock.close()
    assert status_line(answer) == "HTTP/1.1 422 Unprocessable Entity", answer[:200]


def largest_form() -> list[dict]:
    """The costliest form the API accepts: 50 enum fields whose options fill
    the form's byte limit."""
    from graphs.intake.form_spec import MAX_FORM_BYTES

    form: list[dict[str, Any]] = [{"name": f"f{i}", "type": "enum", "required": True, "enum": []} for i in range(50)]
    j = 0
    while True:
        option = f"{'o' * 190}{j:05d}"
        form[j % 50]["enum"].append(option)
        if len(json.dumps(form).encode()) > MAX_FORM_BYTES:
            form[j % 50]["enum"].pop()
            return form
        j += 1


async def test_heavy_turns_do_not_stall_the_server(servers, alice):
    """Turns on the largest form with a 16,000-character
    message, one after another, run while /api/health keeps answering in under
    100 ms (before: one such turn held the event loop for seconds)."""
    server = servers()
    headers = {"Authorization": f"Bearer {alice}"}
    text = ("o" * 199 + " ") * 80
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        for i in range(2):
            response = await client.post(
                "/api/sessions", headers=headers, json={"key": f"big{i}", "form": largest_form()}
            )
            assert response.status_code == 201, response.text
        latencies: list[float] = []
        turns_done = asyncio.Event()

        async def probe():
            while not turns_done.is_set():
                started = time.perf_counter()
                assert (await client.get("/api/health")).status_code == 200
                latencies.append(time.perf_counter() - started)
                await asyncio.sleep(0.02)

        done = 0

        async def turns():
            nonlocal done
            try:
                # At least 8 turns, and as many more as it takes the probe
                # to have answered 10 times while they ran: a fast server
                # must not make the test see too little.
                while done < 8 or (len(latencies) < 10 and done < 200):
                    answer = await client.post(
                        f"/api/sessions/big{done % 2}/turns", headers=headers, json={"text": text[:16_000]}
                    )
                    assert answer.status_code == 200, answer.text[:300]
                    done += 1
            finally:
                turns_done.set()

        started = time.perf_counter()
        await asyncio.gather(probe(), turns())
        elapsed = time.perf_counter() - started
    worst = max(latencies)
    print(sorted(round(x * 1000) for x in latencies))
    print(
        f"\n{done} heavy turns in {elapsed:.1f} s; /api/health answered {len(latencies)} times, "
        f"worst {worst * 1000:.0f} ms"
    )
    assert len(latencies) >= 10
    assert worst < 0.1, f"/api/health took {worst * 1000:.0f} ms"
