"""Real server processes for system tests: daphne (or `manage.py runserver`)
on a free loopback port, serving the pytest-django *test* database, so rows
a transactional test commits are what the server sees.

Use the `servers` fixture (tests/system/conftest.py provides it):

    def test_x(servers, alice):
        server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="30")
        httpx.get(f"{server.url}/api/health")
        server.kill()      # SIGKILL: a crash at this instant
        server.restart()   # same port, same environment (plus overrides)

Every server is stopped (SIGKILL if SIGTERM is not enough) when the test
ends, before pytest-django flushes the database. Tests that neither kill
nor reconfigure their server share one per module instead
(`module_servers`, same arguments): each test's rows are flushed after it
while the server stays, so each works on threads and keys of its own. In
SQLite mode only one server may serve the file at a time
(agentsite.startup takes `<db file>.lock`), so stop or kill one before
starting the next, and never start one beside a module's.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from django.db import connection

from core.database import is_postgres

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# A backstop, not a wait: start() returns as soon as /api/health answers
# 200 and fails as soon as the process exits. Under CI's load (two passes
# side by side, load average 12-20 on two cores) a daphne took 19-22 s to
# become healthy, too close to the 30 s this was.
STARTUP_SECONDS = 120.0
STOP_SECONDS = 10.0


def served_database_url(settings_dict: dict | None = None) -> str:
    """A DATABASE_URL naming the database this test process uses."""
    settings_dict = settings_dict or connection.settings_dict
    if not is_postgres(settings_dict):
        return f"sqlite:///{Path(settings_dict['NAME']).resolve()}"
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    auth = f"{user}{':' + password if password else ''}@" if user else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{quote(settings_dict['NAME'], safe='')}"


def free_port() -> int:
    # Another process could take it before the server binds; start() then
    # fails with the server's log, which says so.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One server process. `kind` is "daphne" (`daphne agentsite.asgi:application`),
    "runserver" (`manage.py runserver --noreload`, daphne's ASGI runserver)
    or "autoreload" (`manage.py runserver`, as `make run` runs it: a parent
    that watches files and a child that serves).

    Each runs in a process group of its own, which `kill()` ends whole: a
    runserver's serving child must not outlive its test."""

    def __init__(self, *, log_path: Path, kind: str = "daphne", env: dict[str, str] | None = None) -> None:
        assert kind in {"daphne", "runserver", "autoreload"}, kind
        self.kind = kind
        self.log_path = log_path
        self.port = free_port()
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": served_database_url(),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.process: subprocess.Popen | None = None
        # The fixture stops it; this covers a test run that dies before teardown.
        atexit.register(self.kill)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        if self.kind == "daphne":
            return [
                str(BIN / "daphne"),
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "agentsite.asgi:application",
            ]
        if self.kind == "autoreload":
            return [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}"]
        return [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{self.port}"]

    def start(self, timeout: float = STARTUP_SECONDS) -> Server:
        assert self.process is None or self.process.poll() is not None, "already running"
        with open(self.log_path, "ab") as log:
            log.write(f"--- {' '.join(self.command())}\n".encode())
            log.flush()
            # The child keeps its own copy of the file descriptor.
            self.process = subprocess.Popen(
                self.command(),
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = STARTUP_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"the server exited with {code}:\n{self.log_text()}")
            try:
                if httpx.get(f"{self.url}/api/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"not healthy within {timeout} s:\n{self.log_text()}")
            time.sleep(0.1)

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout`; and
        whatever else of its process group is left, SIGKILL."""
        if self.process is not None and self.process.poll() is None:
            self.signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        self.kill()

    def interrupt(self) -> None:
        """SIGINT to the whole process group, as Ctrl-C in a terminal."""
        self.signal_group(signal.SIGINT)

    def signal_group(self, signum: int) -> None:
        if self.process is not None:
            # The group outlives its leader while a child of it runs.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signum)

    def kill(self) -> None:
        """SIGKILL to the process group: the server dies wherever it is, as
        in a crash, and nothing it started lives on."""
        if self.process is None:
            return
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_SECONDS)

    def restart(self, *, kill: bool = False, **env: str) -> Server:
        """Stop (or kill) and start again on the same port, with `env` added."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.env.update(env)
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def _starter(folder: Path) -> Iterator[Callable[..., Server]]:
    """`start(kind="daphne", **env)`, its logs in `folder`; every server it
    started is stopped on the way out, whatever happened."""
    started: list[Server] = []

    def start(kind: str = "daphne", **env: str) -> Server:
        server = Server(log_path=folder / f"server-{len(started)}.log", kind=kind, env=env)
        started.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def servers(transactional_db, tmp_path):
    """`servers(kind="daphne", **env)` starts a server and returns it. It
    depends on `transactional_db`, so every server is gone before the
    database is flushed (and, on PostgreSQL, before it is dropped)."""
    with _starter(tmp_path) as start:
        yield start


@pytest.fixture(scope="module")
def module_servers(django_db_setup, tmp_path_factory):
    """`module_servers(kind="daphne", **env)`: a server for the whole module,
    on the test database: each test's rows are flushed after it, the
    server's caches are keyed by API keys and thread ids a test makes anew.
    One daphne start (many seconds on a loaded machine) instead of one per
    test. Stopped when the module ends, before the database is dropped.
    Never kill or restart it: the next test would get a dead server."""
    with _starter(tmp_path_factory.mktemp("module-servers")) as start:
        yield start
