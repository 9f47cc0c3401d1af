"""The servers a team would pick instead of agentsite, for `make bench
--peers`: LangGraph's own Agent Server (langgraph-api through
`langgraph dev --no-browser`, its in-memory runtime: the PostgreSQL runtime
needs a licence) and Aegra (aegra-api on uvicorn, on the benchmark's
PostgreSQL in a database of its own, with Redis as its broker and job
queue). Each is installed into a virtualenv of its own under `.bench-venvs/`
from the pinned `bench/requirements-<peer>.txt` (reinstalled when that file
changes), never into the project's, and serves the bench's graphs
(bench.peer_graphs). A peer that cannot be installed or started is a
`Peer` whose `status` says why: the table shows it, nothing is dropped."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
VENVS = ROOT / ".bench-venvs"
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PEERS = ("lgapi", "aegra")
LABELS = {"lgapi": "langgraph-api", "aegra": "Aegra"}
GRAPH_FILE = ROOT / "bench" / "peer_graphs.py"
INSTALL_SECONDS = 1800
START_SECONDS = 120


class PeerError(RuntimeError):
    """Why a peer could not be installed or started (shown in the table)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of one process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_cpu(root: int) -> float:
    """CPU seconds of a process and all its descendants (a server's workers)."""
    children: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            parent = int(Path(stat).read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(parent, []).append(int(stat.split("/")[2]))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += proc_cpu(pid)
        todo += children.get(pid, [])
    return total


def database_cpu(admin_url: str, database: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to `database`, by pid
    (the server runs on this machine: /proc sees its backends)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,))]
    return {pid: proc_cpu(pid) for pid in pids}


def find_python(minimum: tuple[int, int]) -> str | None:
    """An interpreter at least `minimum`: BENCH_PEER_PYTHON, then python3.x on
    PATH, then pyenv's installed versions."""
    # The oldest that will do first: the pins were resolved on it.
    candidates = [os.environ.get("BENCH_PEER_PYTHON", ""), sys.executable]
    candidates += [f"python3.{minor}" for minor in range(minimum[1], 15)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = glob.glob(f"{pyenv}/3.*/bin/python3")
    candidates += sorted(found, key=lambda p: [int(n) for n in p.split("/")[-3].split(".")[:2]])
    check = f"import sys; sys.exit(sys.version_info[:2] < {minimum!r})"
    for candidate in filter(None, candidates):
        try:
            if subprocess.run([candidate, "-c", check], capture_output=True, timeout=30).returncode == 0:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


def install(name: str, minimum: tuple[int, int] = (3, 11), log: Path | None = None) -> Path:
    """The peer's virtualenv, (re)installed from bench/requirements-<name>.txt
    unless it already holds exactly that file's pins."""
    requirements = ROOT / "bench" / f"requirements-{name}.txt"
    venv = VENVS / name
    stamp = venv / ".bench-installed"
    python = find_python(minimum)
    if python is None:
        raise PeerError(f"no Python >= {minimum[0]}.{minimum[1]} found (set BENCH_PEER_PYTHON)")
    digest = hashlib.sha256(requirements.read_bytes() + python.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and (venv / "bin" / "python").exists():
        return venv
    print(f"installing {requirements.relative_to(ROOT)} into {venv.relative_to(ROOT)} ({python})", flush=True)
    steps = [
        [python, "-m", "venv", "--clear", str(venv)],
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
            str(requirements),
        ],
    ]
    for command in steps:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise PeerError(f"{command[2]} timed out after {INSTALL_SECONDS} s") from None
        if log is not None:
            with open(log, "a") as out:
                out.write(done.stdout + done.stderr)
        if done.returncode:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
            raise PeerError(f"`{' '.join(command[1:4])}` failed: {tail[0][:200]}")
    stamp.write_text(digest)
    return venv


@dataclass
class Peer:
    """One peer server for the run (or why there is none)."""

    name: str
    status: str = "not started"
    url: str = ""
    log: Path | None = None
    processes: list[subprocess.Popen] = field(default_factory=list)
    # Named CPU counters (cumulative seconds): "server", and for Aegra
    # "redis" and "postgresql" (its database's backends).
    counters: dict[str, Callable[[], float]] = field(default_factory=dict)
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return LABELS[self.name]

    @property
    def running(self) -> bool:
        return self.status == "running"

    def cpu(self) -> dict[str, float]:
        return {part: counter() for part, counter in self.counters.items()}

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.processes)

    def spawn(self, command: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
        with open(self.log or os.devnull, "ab") as out:
            process = subprocess.Popen(
                command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                with _suppress():
                    os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    with _suppress():
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(5)
        for step in reversed(self.cleanup):
            with _suppress():
                step()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-1500:] if self.log and self.log.exists() else ""


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        return kind is not None and issubclass(kind, (OSError, psycopg.Error))


def wait_http(peer: Peer, port: int, path: str) -> None:
    seconds = START_SECONDS
    deadline = time.monotonic() + seconds
    request = f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode()
    while time.monotonic() < deadline:
        if not peer.alive():
            raise PeerError(f"exited at start (code {peer.processes[-1].poll()}): {last_line(peer.tail())}")
        try:
            with socket.create_connection((HOST, port), timeout=2) as sock:
                sock.sendall(request)
                if b" 200 " in sock.recv(100):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise PeerError(f"no answer on {path} within {seconds:.0f} s: {last_line(peer.tail())}")


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


def peer_env(**extra: str) -> dict[str, str]:
    # The project's own settings must not leak into a peer (DATABASE_URL,
    # DJANGO_SETTINGS_MODULE, a virtualenv's PATH entry).
    keep = ("PATH", "HOME", "LANG", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        PYTHONPATH=str(ROOT),
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


def graphs_config() -> dict[str, str]:
    return {"chat": f"{GRAPH_FILE}:chat", "tools": f"{GRAPH_FILE}:tools"}


def start_lgapi(peer: Peer, venv: Path, workdir: Path) -> None:
    config = workdir / "langgraph.json"
    config.write_text(json.dumps({"dependencies": [str(ROOT)], "graphs": graphs_config(), "env": {}}))
    port = free_port()
    command = [str(venv / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload"]
    command += ["--host", HOST, "--port", str(port), "--config", str(config), "--server-log-level", "WARNING"]
    server = peer.spawn(command, peer_env(), workdir)
    peer.counters["server"] = lambda: tree_cpu(server.pid)
    wait_http(peer, port, "/ok")
    peer.url = f"http://{HOST}:{port}"


def start_aegra(peer: Peer, venv: Path, workdir: Path, pg_admin: str, database: str) -> None:
    redis = shutil.which("redis-server")
    if redis is None:
        raise PeerError("redis-server not found (Debian: apt-get install redis-server)")
    redis_port = free_port()
    redis_server = peer.spawn(
        [redis, "--bind", HOST, "--port", str(redis_port), "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        peer_env(),
        workdir,
    )
    peer.counters["redis"] = lambda: proc_cpu(redis_server.pid)
    with psycopg.connect(pg_admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{database}"')

    def drop() -> None:
        with psycopg.connect(pg_admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')

    peer.cleanup.append(drop)
    config = workdir / "aegra.json"
    config.write_text(json.dumps({"dependencies": [str(ROOT)], "graphs": graphs_config()}))
    port = free_port()
    env = peer_env(
        AEGRA_CONFIG=str(config),
        DATABASE_URL=pg_admin.rsplit("/", 1)[0] + "/" + database,
        REDIS_BROKER_ENABLED="true",
        REDIS_URL=f"redis://{HOST}:{redis_port}/0",
        AUTH_TYPE="noop",
        HOST=HOST,
        PORT=str(port),
        ENV_MODE="PRODUCTION",
        OTEL_TARGETS="",
    )
    command = [str(venv / "bin" / "uvicorn"), "aegra_api.main:app", "--host", HOST, "--port", str(port)]
    command += ["--log-level", "warning", "--no-access-log"]
    server = peer.spawn(command, env, workdir)
    peer.counters["server"] = lambda: tree_cpu(server.pid)
    peer.counters["postgresql"] = lambda: sum(database_cpu(pg_admin, database).values())
    wait_http(peer, port, "/health")
    peer.url = f"http://{HOST}:{port}"


def bring_up(name: str, pg_admin: str, suffix: str, logs: Path) -> Peer:
    """Install and start one peer; on failure the Peer says why."""
    peer = Peer(name, log=logs / f"{name}.log")
    stage = "install"
    try:
        venv = install(name, (3, 12) if name == "aegra" else (3, 11), peer.log)
        stage = "start"
        workdir = Path(tempfile.mkdtemp(prefix=f"agentsite-bench-{name}-"))
        peer.cleanup.append(lambda: shutil.rmtree(workdir, ignore_errors=True))
        if name == "lgapi":
            start_lgapi(peer, venv, workdir)
        else:
            start_aegra(peer, venv, workdir, pg_admin, f"agentsite_bench_aegra_{suffix}")
        peer.status = "running"
    except (PeerError, OSError, psycopg.Error) as exc:
        peer.status = f"{stage} failed: {exc}"
        print(f"{peer.label}: {peer.status}", file=sys.stderr, flush=True)
        peer.stop()
    except BaseException:  # stopped while starting: nothing it started outlives the bench
        peer.stop()
        raise
    return peer


def parse_peers(value: str) -> list[str]:
    if value == "none":
        return []
    if value == "all":
        return list(PEERS)
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise SystemExit(f"--peers: unknown {', '.join(unknown)} (none, all, or a list of {', '.join(PEERS)})")
    return names
