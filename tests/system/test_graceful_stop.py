"""Graceful stop with real daphne processes: on SIGTERM/SIGINT the server
stops accepting, lets a running turn finish within
AGENT_SHUTDOWN_GRACE_SECONDS, aborts one that runs past it with
`server_shutdown` — sent to its stream, and to the JSON request waiting for
it — and exits; an idle stop is prompt and prints no traceback."""

from __future__ import annotations

import json
import signal
import threading
import time
from typing import Any

import httpx
import pytest

from sessions_app.services import api_key_create
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Stream(threading.Thread):
    """An SSE chat read on a thread: (event, data) pairs as they arrive."""

    def __init__(self, url: str, key: str, session: str) -> None:
        super().__init__(daemon=True)
        self.url, self.key, self.session = url, key, session
        self.events: list[tuple[str, Any]] = []  # (event, its data as JSON decodes it)
        self.first_delta = threading.Event()
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            with httpx.stream(
                "POST",
                f"{self.url}/api/sessions/{self.session}/turns/stream",
                json={"text": "hello"},
                headers=auth(self.key),
                timeout=60,
            ) as response:
                assert response.status_code == 200, response.read()
                name = None
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        name = line.removeprefix("event: ")
                    elif line.startswith("data: ") and name:
                        data = line.removeprefix("data: ")
                        self.events.append((name, json.loads(data)))
                        if name == "delta":
                            self.first_delta.set()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.first_delta.set()

    def names(self) -> list[str]:
        return [name for name, _ in self.events]


def exits_within(server, seconds: float) -> tuple[int, float]:
    started = time.monotonic()
    code = server.process.wait(seconds)
    return code, time.monotonic() - started


def refuses_connections(url: str, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/api/health", timeout=0.5)
        except httpx.ConnectError:
            return True
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    return False


def test_a_running_turn_finishes_within_the_grace_period(servers):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="150", AGENT_SHUTDOWN_GRACE_SECONDS="20")
    key = api_key_create(owner="alice")[1]
    stream = Stream(server.url, key, "finishes")
    assert stream.first_delta.wait(30) and stream.error is None
    server.process.send_signal(signal.SIGTERM)

    assert refuses_connections(server.url), "still accepting connections after SIGTERM"
    stream.join(30)
    assert stream.error is None, stream.error
    assert stream.names()[-1] == "done", stream.names()
    code, _ = exits_within(server, 15)
    assert code == 0, server.log_text()
    turn = AgentTurn.objects.get(session__key="finishes")
    assert turn.status == AgentTurn.Status.COMMITTED
    assert "Traceback" not in server.log_text()


def test_a_turn_past_the_grace_period_ends_with_server_shutdown(servers):
    grace = 1.5
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="600", AGENT_SHUTDOWN_GRACE_SECONDS=str(grace))
    key = api_key_create(owner="alice")[1]
    # A keep-alive connection opened before the stop: it may still send requests.
    client = httpx.Client(base_url=server.url, headers=auth(key), timeout=60)
    assert client.get("/api/health").status_code == 200
    stream = Stream(server.url, key, "too-long")
    answers: list[httpx.Response] = []
    waiter = threading.Thread(
        target=lambda: answers.append(
            httpx.post(
                f"{server.url}/api/sessions/too-long-json/turns", json={"text": "hello"}, headers=auth(key), timeout=60
            )
        ),
        daemon=True,
    )
    waiter.start()
    assert stream.first_delta.wait(30) and stream.error is None
    time.sleep(0.3)  # the JSON turn has started too
    signalled = time.monotonic()
    server.process.send_signal(signal.SIGTERM)

    # While it drains, what comes in on an open connection is refused. A
    # request sent at the same instant as the signal may still be served:
    # the stop is noticed on the server's next turn of its event loop.
    deadline = time.monotonic() + 1.0
    while (health := client.get("/api/health")).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert health.status_code == 503 and health.json()["status"] == "stopping"
    refused = client.post("/api/sessions/late/turns", json={"text": "hello"})
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "server_shutdown"
    client.close()

    stream.join(30)
    waiter.join(30)
    assert stream.error is None, stream.error
    name, data = stream.events[-1]
    assert name == "error", stream.names()
    assert data["code"] == "server_shutdown"
    assert [r.status_code for r in answers] == [503]
    assert answers[0].json()["error"]["code"] == "server_shutdown"
    code, _ = exits_within(server, 20)
    took = time.monotonic() - signalled
    assert code == 0, server.log_text()
    assert took < grace + 8, took
    for session in ("too-long", "too-long-json"):
        turn = AgentTurn.objects.get(session__key=session)
        assert turn.status == AgentTurn.Status.ABORTED
        assert turn.error["code"] == "server_shutdown"
    assert not AgentTurn.objects.filter(session__key="late").exists()
    assert "Traceback" not in server.log_text()


@pytest.mark.parametrize("kind", ["daphne", "runserver"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_idle_stop_is_prompt_and_quiet(servers, kind, signum):
    """runserver here is `--noreload`: with the autoreloader the reloader
    owns the signals (docs/operations.md, "Graceful stop")."""
    # Prompt means not waiting out the grace period: a long one, so that a
    # stop that waited could not pass for prompt on a slow machine.
    grace = 90
    server = servers(kind=kind, AGENT_SHUTDOWN_GRACE_SECONDS=str(grace))
    key = api_key_create(owner="alice")[1]
    answer = httpx.post(f"{server.url}/api/sessions/idle/turns", json={"text": "hello"}, headers=auth(key), timeout=30)
    assert answer.status_code == 200  # the checkpointer's connection is open now
    server.process.send_signal(signum)
    code, took = exits_within(server, grace + 30)
    log = server.log_text()
    assert code == 0, log
    assert took < grace / 3, took
    assert "Traceback" not in log and "Exception ignored" not in log, log


def test_ctrl_c_under_the_autoreloader_closes_the_checkpointer_first(servers):
    """`make run`'s runserver: its autoreloader owns Ctrl-C and the server
    runs on a daemon thread, so the reactor never shuts down; the
    checkpointer's connections are closed at exit instead, before the
    interpreter tears its modules down. Python's ResourceWarning names a
    connection still open then (aiosqlite's; psycopg's), which is what
    became "Exception ignored in: … aiosqlite … TypeError"."""
    server = servers(kind="autoreload", PYTHONWARNINGS="always::ResourceWarning")
    key = api_key_create(owner="alice")[1]
    url = f"{server.url}/api/sessions/ctrl-c/turns"
    answer = httpx.post(url, json={"text": "hello"}, headers=auth(key), timeout=30)
    assert answer.status_code == 200  # the checkpointer's connection is open now
    server.interrupt()
    server.process.wait(30)
    log = server.log_text()
    assert "Exception ignored" not in log and "Traceback" not in log, log
    # aiosqlite's "… was deleted before being closed", psycopg's "… was deleted while still open".
    assert "was deleted" not in log, log
