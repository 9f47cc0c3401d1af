"""agentsite's side of `make bench`: its daphne processes, their databases
(created and dropped per run), the environment they run in, and one
`/api/` turn through the bench's client."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.client import Connection

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
TEXT = "Hello! I would like to book a table for four people next Friday evening."
GRAPHS = (
    "intake=graphs.intake.graph:build_intake_graph,"
    "booking=graphs.booking.graph:build_booking_graph,"
    "chat=bench.graphs:build_chat_graph,"
    "tools=bench.graphs:build_tool_graph"
)
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- processes and databases -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def base_env(database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "DATABASE_URL": database_url,
        "DEBUG": "false",
        "SECRET_KEY": "bench-" + uuid.uuid4().hex,
        "ALLOWED_HOSTS": f"{HOST},localhost",
        "AGENT_GRAPHS": GRAPHS,
        "AGENT_GRAPH": "chat",
        "AGENT_MODEL": "offline",
        "AGENT_OFFLINE_TOKEN_DELAY_MS": "0",
        "AGENT_SESSION_WAIT_SECONDS": "60",
        # A full run creates a few thousand sessions for its one owner.
        "AGENT_MAX_SESSIONS_PER_OWNER": "1000000",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip()


@dataclass
class Database:
    kind: str  # "postgresql" | "sqlite"
    url: str
    admin_url: str | None = None  # PostgreSQL: where to create/drop it
    name: str | None = None
    tmp: str | None = None

    @classmethod
    def postgres(cls, admin_url: str, name: str) -> Database:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        base = admin_url.rsplit("/", 1)[0]
        return cls("postgresql", f"{base}/{name}", admin_url, name)

    @classmethod
    def sqlite(cls) -> Database:
        tmp = tempfile.mkdtemp(prefix="agentsite-bench-")
        return cls("sqlite", f"sqlite:///{tmp}/bench.sqlite3", tmp=tmp)

    def drop(self) -> None:
        if self.kind == "postgresql":
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        elif self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.kind == "postgresql":
            with psycopg.connect(self.url) as conn:
                return conn.execute(sql, params).fetchall()
        import sqlite3

        with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql.replace("%s", "?"), params).fetchall()


class Server:
    """One daphne process serving the benchmark's database."""

    def __init__(self, database: Database, log: Path) -> None:
        self.database = database
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> Server:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [str(BIN / "daphne"), "-b", HOST, "-p", str(self.port), "agentsite.asgi:application"],
                cwd=ROOT,
                env=base_env(self.database.url),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection((HOST, self.port), timeout=1) as sock:
                    sock.sendall(f"GET /api/health HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
                    if b" 200 " in sock.recv(100):
                        return self
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the server did not start:\n{self.log.read_text()[-3000:]}")
            try:
                time.sleep(0.1)
            except BaseException:
                self.stop()
                raise

    @property
    def cpu(self) -> float:
        return cpu_of(self.process.pid)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


async def chat(conn: Connection, key: str, idem: str | None = None) -> tuple[float, int, bytes]:
    started = time.perf_counter()
    headers = {"Idempotency-Key": idem} if idem else {}
    status, body = await conn.request("POST", f"/api/sessions/{key}/turns", {"text": TEXT}, **headers)
    return time.perf_counter() - started, status, body


async def connections(server: Server, api_key: str, n: int) -> list[Connection]:
    return [await Connection(HOST, server.port, api_key).open() for _ in range(n)]
