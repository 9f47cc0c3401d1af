"""Real server processes sharing one database (docs/scale.md, "Beyond one machine").

6. Two daphne processes on one PostgreSQL database, 20 concurrent clients on
   5 shared sessions: sessions stay serial across processes.
7. PostgreSQL goes away mid-load: the server's connections are cut (never the
   shared cluster): 503 / SSE `error`, never `done` for uncommitted work, and
   recovery without a restart.
8. SQLite single instance: a second server on the same file refuses to start;
   `runserver`'s autoreloader parent and `migrate` never take the lock.

Every scenario ends with `audit()`: the database, not the clients, says what
was committed, and every turn a client saw acknowledged must be in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.conf import settings
from django.db import connection
from httpx_sse import aconnect_sse
from psycopg import sql

from core.database import is_postgres, postgres_conninfo
from core.http.health_early import FRESH_SECONDS
from sessions_app.models import AgentSession
from tests.system import report
from tests.system.server import ROOT, STOP_SECONDS, Server, served_database_url
from turns_app import history
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

POSTGRES = is_postgres(settings.DATABASES["default"])
# Not skips: tests/conftest.py deselects them on the other backend, and CI
# runs the suite on both, so each runs exactly where it means something.
postgres_only = pytest.mark.postgres_only  # SQLite mode allows one server process per file
sqlite_only = pytest.mark.sqlite_only  # the single-instance file lock exists in SQLite mode

# What a client may be told while it waits, loses its connection or the
# database is away; a retry with the same Idempotency-Key is safe after each.
RETRYABLE = frozenset(
    {
        "session_busy",  # waited AGENT_SESSION_WAIT_SECONDS and still busy
        "turn_in_progress",  # the key's turn is pending (its process lost it)
        "storage_unavailable",
        "stale_turn",  # the turn lost its lease during an outage
        # Its process could not renew the lease while the database was away,
        # and another request took the session first: aborted, nothing
        # committed, the same key runs it again (docs/api.md, "Errors").
        "lease_expired",
        "transport",  # connection refused/reset, read timeout
        "no_outcome",  # an SSE stream that ended without done/error
    }
)


# --- clients -----------------------------------------------------------------------


@dataclass
class Attempt:
    """One HTTP request for a logical turn."""

    server: int
    mode: str  # "json" | "sse"
    started: float
    ended: float = 0.0
    status: int | None = None  # None: no HTTP response
    code: str | None = None  # the error code; None once acknowledged
    turn_id: str | None = None
    body: str | None = None  # the acknowledged body (200, or SSE `done` data)
    replayed: bool = False


@dataclass
class Turn:
    """A logical turn: one text, one Idempotency-Key, retried until acknowledged."""

    session: str
    text: str
    key: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def acked(self) -> Attempt | None:
        return next((a for a in self.attempts if a.body is not None), None)


def auth(api_key: str, idem: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {api_key}"}
    if idem is not None:
        headers["Idempotency-Key"] = idem
    return headers


def error_code(status: int, content: bytes) -> str:
    try:
        return json.loads(content)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return f"http_{status}"


def new_client(timeout: float = 60) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=5))


async def send(client: httpx.AsyncClient, url: str, server: int, mode: str, api_key: str, turn: Turn) -> Attempt:
    attempt = Attempt(server=server, mode=mode, started=time.monotonic())
    path = f"{url}/api/sessions/{turn.session}/turns"
    headers = auth(api_key, turn.key)
    try:
        if mode == "json":
            response = await client.post(path, json={"text": turn.text}, headers=headers)
            attempt.status = response.status_code
            attempt.replayed = response.headers.get("idempotent-replayed") == "true"
            if response.status_code == 200:
                attempt.body = response.text
                attempt.turn_id = json.loads(attempt.body)["turn_id"]
            else:
                attempt.code = error_code(response.status_code, response.content)
        else:
            async with aconnect_sse(
                client, "POST", f"{path}/stream", json={"text": turn.text}, headers=headers
            ) as source:
                response = source.response
                attempt.status = response.status_code
                attempt.replayed = response.headers.get("idempotent-replayed") == "true"
                if response.status_code != 200:
                    attempt.code = error_code(response.status_code, await response.aread())
                else:
                    attempt.code = "no_outcome"
                    async for event in source.aiter_sse():
                        data = json.loads(event.data)
                        if event.event == "turn":
                            attempt.turn_id = data["turn_id"]
                        elif event.event == "done":
                            assert data["turn_id"] == attempt.turn_id, (data, attempt)
                            attempt.body, attempt.code = event.data, None
                            break
                        elif event.event == "error":
                            attempt.code = data.get("code", "error_without_code")
                            break
    except httpx.TransportError:
        attempt.code = "transport"
    attempt.ended = time.monotonic()
    return attempt


async def drive(
    client: httpx.AsyncClient,
    urls: list[str],
    first: int,
    mode: str,
    api_key: str,
    turn: Turn,
    give_up_at: float,
) -> None:
    """Sends the turn until acknowledged, answered with a non-retryable
    error, or past `give_up_at`; retries go to the other server."""
    n = 0
    while True:
        server = (first + n) % len(urls)
        attempt = await send(client, urls[server], server, mode, api_key, turn)
        turn.attempts.append(attempt)
        if attempt.body is not None or attempt.code not in RETRYABLE:
            return
        if time.monotonic() > give_up_at:
            return
        n += 1
        await asyncio.sleep(min(0.05 * 2 ** min(n, 4), 0.5))


# --- the database's word -------------------------------------------------------------


@dataclass
class Audit:
    committed: int = 0
    aborted: int = 0
    pending: int = 0
    lost: int = 0
    duplicated: int = 0
    problems: list[str] = field(default_factory=list)


def audit(owner: str, session_keys: list[str], turns: list[Turn]) -> Audit:
    """Reads every session's rows and checks the invariants; `lost` and
    `duplicated` come from here, not from the clients' counts."""
    out = Audit()
    committed_rows: dict[str, AgentTurn] = {}
    for key in session_keys:
        session = AgentSession.objects.get(owner=owner, key=key)
        rows = list(AgentTurn.objects.filter(session=session).order_by("epoch", "number"))
        out.pending += sum(r.status == AgentTurn.Status.PENDING for r in rows)
        out.aborted += sum(r.status == AgentTurn.Status.ABORTED for r in rows)
        done = sorted(
            (r for r in rows if r.status == AgentTurn.Status.COMMITTED),
            key=lambda r: json.loads(r.result)["version"],
        )
        out.committed += len(done)
        committed_rows.update({str(r.id): r for r in done})
        where = f"session {key}"
        if any(r.epoch != session.epoch for r in rows):
            out.problems.append(f"{where}: turns of another epoch")
        versions = [json.loads(r.result)["version"] for r in done]
        if versions != list(range(1, len(done) + 1)):
            out.problems.append(f"{where}: versions not gapless: {versions}")
        if [r.base_version for r in done] != [v - 1 for v in versions]:
            out.problems.append(f"{where}: base versions do not chain")
        if (session.version, session.turn_count) != (len(done), len(done)):
            out.problems.append(
                f"{where}: version {session.version}, turn_count {session.turn_count}, {len(done)} committed turns"
            )
        if session.active_turn_id is not None and not any(
            r.id == session.active_turn_id and r.status == AgentTurn.Status.PENDING for r in rows
        ):
            out.problems.append(f"{where}: held by a turn that is not pending")
        # The transcript holds exactly the committed turns, in version order,
        # two messages each.
        messages = history.transcript(session.head_turn_id)
        expected = []
        for r in done:
            expected += [
                {"role": "user", "content": r.request["text"], "turn_id": str(r.id)},
                {
                    "role": "assistant",
                    "content": json.loads(r.result)["reply"],
                    "turn_id": str(r.id),
                },
            ]
        if messages != expected:
            out.problems.append(
                f"{where}: transcript ({len(messages)} messages) is not the committed turns ({len(expected)} messages)"
            )
        in_transcript = Counter(m["content"] for m in messages if m["role"] == "user")
        in_log = Counter(r.request["text"] for r in done)
        out.duplicated += sum(c - 1 for c in in_transcript.values() if c > 1)
        out.duplicated += sum(c - 1 for c in in_log.values() if c > 1)
    texts = {t.text for t in turns}
    strangers = [r.request["text"] for r in committed_rows.values() if r.request["text"] not in texts]
    if strangers:
        out.problems.append(f"committed turns no client sent: {strangers[:3]}")
    for turn in turns:
        acked = turn.acked
        if acked is None:
            continue
        row = committed_rows.get(acked.turn_id or "")
        if row is None or row.result != acked.body or row.request["text"] != turn.text:
            out.lost += 1
            out.problems.append(f"acknowledged but not committed as acknowledged: {turn.key}")
    return out


def attempts_of(turns: list[Turn]) -> list[Attempt]:
    return [a for t in turns for a in t.attempts]


def codes(turns: list[Turn]) -> Counter:
    return Counter(a.code or "done" for a in attempts_of(turns))


def api_matches_database(urls: list[str], api_key: str, session_keys: list[str]) -> None:
    """Each server's transcript and turn log say what the database says."""
    for url in urls:
        with httpx.Client(base_url=url, timeout=10, headers=auth(api_key)) as client:
            for key in session_keys:
                session = AgentSession.objects.get(key=key)
                messages = client.get(f"/api/sessions/{key}/messages").json()
                assert messages == history.transcript(session.head_turn_id), (url, key)
                log = client.get(f"/api/sessions/{key}/turns").json()
                rows = AgentTurn.objects.filter(session=session, epoch=session.epoch)
                assert {(t["id"], t["status"]) for t in log} == {(str(r.id), r.status) for r in rows}, (url, key)


# --- 6. two server processes, one PostgreSQL ---------------------------------------------

CLIENTS = 20
TURNS_PER_CLIENT = 10
SHARED_SESSIONS = 5
LOAD_SECONDS = 100


@postgres_only
def test_two_servers_share_sessions_serially(servers, alice):
    env = {
        "AGENT_OFFLINE_TOKEN_DELAY_MS": "2",
        # Clients wait for the session rather than get session_busy.
        "AGENT_SESSION_WAIT_SECONDS": "30",
    }
    pair = [servers(**env), servers(**env)]
    urls = [s.url for s in pair]
    nonce = uuid.uuid4().hex[:8]
    keys = [f"shared-{n}" for n in range(SHARED_SESSIONS)]
    turns: list[Turn] = []
    give_up_at = time.monotonic() + LOAD_SECONDS - 10

    async def client_run(i: int) -> None:
        mode = "sse" if i % 2 == 0 else "json"
        async with new_client() as client:
            for t in range(TURNS_PER_CLIENT):
                turn = Turn(
                    session=keys[i % SHARED_SESSIONS],
                    text=f"note-c{i:02d}-t{t:02d}-{nonce}",
                    key=f"c{i:02d}-t{t:02d}-{nonce}",
                )
                turns.append(turn)
                # Alternate processes turn by turn: consecutive turns of one
                # session keep landing on different servers.
                await drive(client, urls, (i + t) % 2, mode, alice, turn, give_up_at)

    async def load() -> float:
        started = time.monotonic()
        async with asyncio.timeout(LOAD_SECONDS):
            await asyncio.gather(*(client_run(i) for i in range(CLIENTS)))
        return time.monotonic() - started

    elapsed = asyncio.run(load())

    seen = codes(turns)
    logs = "\n".join(s.log_text()[-3000:] for s in pair)
    assert set(seen) <= RETRYABLE | {"done"}, (seen, logs)
    assert len(turns) == CLIENTS * TURNS_PER_CLIENT
    unacked = [t.key for t in turns if t.acked is None]
    assert not unacked, (unacked[:5], seen, logs)
    # Both processes committed turns, in both delivery modes.
    served = Counter((a.server, a.mode) for a in attempts_of(turns) if a.body is not None)
    assert set(served) == {(s, m) for s in (0, 1) for m in ("json", "sse")}, served

    result = audit("alice", keys, turns)
    assert not result.problems, result.problems[:10]
    assert result.pending == 0
    assert result.committed == CLIENTS * TURNS_PER_CLIENT, result
    assert (result.lost, result.duplicated) == (0, 0)
    api_matches_database(urls, alice, keys)
    # The contention was real: requests on one session overlapped in time,
    # and consecutive commits of a session came from different processes.
    served_by = {t.acked.turn_id: t.acked.server for t in turns}
    handoffs = 0
    for key in keys:
        rows = AgentTurn.objects.filter(session__key=key, status=AgentTurn.Status.COMMITTED)
        order = [served_by[str(r.id)] for r in sorted(rows, key=lambda r: r.base_version)]
        handoffs += sum(a != b for a, b in itertools.pairwise(order))
    spans = [(t.session, a.started, a.ended) for t in turns for a in t.attempts]
    # The most requests in flight on one session at one instant.
    overlap = max(sum(s == key and start <= at < end for s, start, end in spans) for key, at, _ in spans)
    assert handoffs >= SHARED_SESSIONS and overlap >= 2, (handoffs, overlap)
    print(
        f"\nscenario 6: {len(turns)} turns, {len(attempts_of(turns))} requests in {elapsed:.1f} s; "
        f"answers {dict(seen)}; aborted rows {result.aborted}; cross-process handoffs {handoffs}; "
        f"most requests in flight on one session {overlap}"
    )
    report.record(
        "6 two servers, one PostgreSQL",
        attempted=len(turns),
        committed=result.committed,
        aborted=result.aborted,
        lost=result.lost,
        duplicated=result.duplicated,
    )


# --- 7. PostgreSQL goes away mid-load ------------------------------------------------------

OUTAGE_CLIENTS = 8
OUTAGE_SESSIONS = 4
# Longer than the pools' getconn timeout (10 s, agentsite/settings.py and the
# checkpointer): requests that reach for a connection during the outage must
# be answered 503 / `error`, not just wait it out.
OUTAGE_HOLD_SECONDS = 12.0
OUTAGE_LEASE_SECONDS = 3.0
OUTAGE_SESSION_WAIT_SECONDS = 20
AFTER_RECOVERY_SECONDS = 3.0
OUTAGE_TEST_SECONDS = 110


def admin_connection() -> psycopg.Connection:
    """A connection to the `postgres` database, opened before the outage: it
    survives ALLOW_CONNECTIONS false on the test database."""
    settings_dict = {**connection.settings_dict, "NAME": "postgres", "OPTIONS": {}}
    return psycopg.connect(postgres_conninfo(settings_dict), autocommit=True, connect_timeout=5)


def allow_connections(admin: psycopg.Connection | None, database: str, allow: bool) -> None:
    statement = sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}").format(
        sql.Identifier(database), sql.SQL("true" if allow else "false")
    )
    if admin is not None and not admin.closed:
        try:
            admin.execute(statement)
            return
        except psycopg.Error:
            if not allow:
                raise
    # Restoring must not depend on the first connection having survived.
    with admin_connection() as fresh:
        fresh.execute(statement)


def server_backends(admin: psycopg.Connection, database: str, application_name: str) -> int:
    (count,) = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
        [database, application_name],
    ).fetchone()
    return count


def postgres_client_ports(pid: int, postgres_port: int) -> set[int]:
    """Local ports of the process's TCP connections to PostgreSQL (from
    /proc: its socket inodes, matched against the TCP tables)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            local, remote, inode = cols[1], cols[2], cols[9]
            if inode in inodes and int(remote.rpartition(":")[2], 16) == postgres_port:
                ports.add(int(local.rpartition(":")[2], 16))
    return ports


def names_of_backends(admin: psycopg.Connection, database: str, ports: set[int]) -> list[str]:
    """application_name of each backend serving one of these client ports."""
    rows = admin.execute(
        "SELECT client_port, application_name FROM pg_stat_activity WHERE datname = %s",
        [database],
    ).fetchall()
    return [name for port, name in rows if port in ports]


def terminate(admin: psycopg.Connection, database: str, application_name: str) -> int:
    (count,) = admin.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
        [database, application_name],
    ).fetchone()
    return count


@postgres_only
def test_postgres_outage_mid_load(servers, alice):
    database = connection.settings_dict["NAME"]
    application_name = f"agentsite-outage-{uuid.uuid4().hex[:12]}"
    server = servers(
        DATABASE_URL=f"{served_database_url()}?application_name={application_name}",
        AGENT_OFFLINE_TOKEN_DELAY_MS="5",
        AGENT_TURN_LEASE_SECONDS=str(OUTAGE_LEASE_SECONDS),
        AGENT_SESSION_WAIT_SECONDS=str(OUTAGE_SESSION_WAIT_SECONDS),
    )
    urls = [server.url]
    nonce = uuid.uuid4().hex[:8]
    keys = [f"load-{n}" for n in range(OUTAGE_SESSIONS)]
    turns: list[Turn] = []
    probes: list[Turn] = []
    timeline: dict[str, float] = {}
    facts: dict[str, Any] = {}
    stop = asyncio.Event()

    async def client_run(i: int) -> None:
        mode = "sse" if i % 2 == 0 else "json"
        t = 0
        async with new_client(45) as client:
            while not stop.is_set():
                turn = Turn(keys[i % OUTAGE_SESSIONS], f"load-c{i}-t{t:03d}-{nonce}", f"o{i}-{t}-{nonce}")
                turns.append(turn)
                await drive(client, urls, 0, mode, alice, turn, time.monotonic() + 40)
                t += 1

    async def health(client: httpx.AsyncClient, timeout: float) -> int | str:
        try:
            return (await client.get(f"{server.url}/api/health", timeout=timeout)).status_code
        except httpx.TransportError as exc:
            return type(exc).__name__

    async def orchestrate(admin: psycopg.Connection) -> None:
        async with new_client(10) as client:
            # Load first: some committed turns, and the server's pools open.
            while sum(t.acked is not None for t in turns) < 10:  # noqa: ASYNC110  (other tasks' counts)
                await asyncio.sleep(0.05)
            facts["backends_before"] = await asyncio.to_thread(server_backends, admin, database, application_name)
            # Every connection the server holds carries the name (Django's
            # pool and the checkpointer's): cutting by name cuts them all.
            postgres_port = int(connection.settings_dict.get("PORT") or 5432)
            ports = postgres_client_ports(server.process.pid, postgres_port)
            facts["server_backend_names"] = sorted(
                set(await asyncio.to_thread(names_of_backends, admin, database, ports))
            )
            facts["server_backends"] = len(ports)
            timeline["outage_start"] = time.monotonic()
            try:
                await asyncio.to_thread(allow_connections, admin, database, False)
                facts["terminated"] = await asyncio.to_thread(terminate, admin, database, application_name)
                # Until the early answer, at most FRESH_SECONDS old, is
                # one from after the cut (docs/operations.md, "Health").
                cut = time.monotonic()
                while (during := await health(client, 2)) == 200 and time.monotonic() - cut < FRESH_SECONDS + 1:  # noqa: ASYNC110  (the server's answer)
                    await asyncio.sleep(0.1)
                facts["health_during"] = during
                await asyncio.sleep(OUTAGE_HOLD_SECONDS)
                facts["backends_during"] = await asyncio.to_thread(server_backends, admin, database, application_name)
            finally:
                await asyncio.to_thread(allow_connections, admin, database, True)
                timeline["outage_end"] = time.monotonic()
            # Recovery: a fresh chat on a session of its own, until one commits.
            n = 0
            while True:
                probe = Turn("probe", f"probe-{n}-{nonce}", f"probe-{n}-{nonce}")
                probes.append(probe)
                attempt = await send(client, server.url, 0, "json", alice, probe)
                probe.attempts.append(attempt)
                if attempt.body is not None:
                    timeline["recovered"] = attempt.ended
                    break
                n += 1
                await asyncio.sleep(0.1)
            facts["health_after"] = await health(client, 10)
            await asyncio.sleep(AFTER_RECOVERY_SECONDS)
            stop.set()

    async def main(admin: psycopg.Connection) -> None:
        async with asyncio.timeout(OUTAGE_TEST_SECONDS - 25):
            await asyncio.gather(orchestrate(admin), *(client_run(i) for i in range(OUTAGE_CLIENTS)))

    admin = admin_connection()
    try:
        asyncio.run(main(admin))
    finally:
        try:
            allow_connections(admin, database, True)  # again: whatever happened above
        finally:
            admin.close()

    # After the lease, one more turn per session expires whatever the cut
    # left holding it; then nothing may be pending.
    time.sleep(OUTAGE_LEASE_SECONDS + 0.5)
    left_pending = AgentTurn.objects.filter(status=AgentTurn.Status.PENDING).count()
    sweeps = [Turn(key, f"sweep-{key}-{nonce}", f"sweep-{key}-{nonce}") for key in [*keys, "probe"]]

    async def sweep() -> None:
        async with new_client(30) as client:
            for turn in sweeps:
                await drive(client, urls, 0, "json", alice, turn, time.monotonic() + 15)

    asyncio.run(sweep())
    everything = [*turns, *probes, *sweeps]
    seen = codes(everything)
    log = server.log_text()[-4000:]

    outage = (timeline["outage_start"], timeline["outage_end"])
    during = [a for a in attempts_of(everything) if outage[0] <= a.ended <= outage[1]]
    # Nothing can have been committed while the database was away: an
    # acknowledgement for a request that began and ended inside the outage
    # would be a lie.
    impossible = [a for a in during if a.body is not None and a.started > outage[0]]
    # Whether a request caught by the cut is refused (`storage_unavailable`,
    # once a pool checkout gives up after 10 s) or waits the outage out (a
    # chat waiting for its busy session keeps waiting, up to
    # AGENT_SESSION_WAIT_SECONDS) depends on where it was when the cut came
    # and on the machine's load: both are right. A hang is not.
    caught = [a for a in attempts_of(everything) if a.started <= outage[1] and a.ended >= outage[0]]
    slowest = max(a.ended - a.started for a in caught)
    # The cut reached the server's Django pool and its checkpointer pool alike.
    assert facts["backends_before"] >= 2 and facts["server_backends"] >= 2, facts
    assert facts["server_backend_names"] == [application_name], facts
    assert facts["terminated"] >= 2 and facts["backends_during"] == 0, facts
    assert facts["health_during"] != 200, facts
    assert caught and slowest < OUTAGE_HOLD_SECONDS + OUTAGE_SESSION_WAIT_SECONDS, (slowest, seen, log)
    assert not impossible, impossible
    assert set(seen) <= RETRYABLE | {"done"}, (seen, log)
    # Recovered without a restart: same process, healthy, chats commit.
    assert server.process.poll() is None
    assert facts["health_after"] == 200, facts
    assert all(t.acked is not None for t in sweeps), ([t.attempts for t in sweeps], log)

    result = audit("alice", [*keys, "probe"], everything)
    assert not result.problems, (result.problems[:10], log)
    assert result.pending == 0
    assert (result.lost, result.duplicated) == (0, 0)
    acked = sum(t.acked is not None for t in everything)
    assert result.committed >= acked
    recovery = timeline["recovered"] - timeline["outage_end"]
    print(
        f"\nscenario 7: {len(everything)} turns, {len(attempts_of(everything))} requests; answers "
        f"{dict(seen)}; {len(during)} answered during the outage; facts {facts}; "
        f"pending before the sweep {left_pending}; recovery {recovery:.2f} s"
    )
    report.record(
        "7 PostgreSQL outage mid-load",
        attempted=len(everything),
        committed=result.committed,
        aborted=result.aborted,
        lost=result.lost,
        duplicated=result.duplicated,
        recovery_seconds=recovery,
    )


# --- 8. SQLite single instance -------------------------------------------------------------


def lock_holder(db_file: Path) -> int | None:
    raw = db_file.with_name(db_file.name + ".lock").read_text().strip()
    return int(raw) if raw.isdigit() else None


def lock_is_held(db_file: Path) -> bool:
    with open(db_file.with_name(db_file.name + ".lock"), "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after ")".
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


class ReloadingRunserver(Server):
    """`manage.py runserver` with its autoreloader: a parent that watches
    files and a child (RUN_MAIN=true) that serves."""

    def __init__(self, *, log_path: Path) -> None:
        super().__init__(log_path=log_path, kind="runserver")

    def command(self) -> list[str]:
        return [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}"]

    def _end_children(self, sig: int) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        for child in children_of(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, sig)

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        self._end_children(signal.SIGTERM)
        super().stop(timeout)

    def kill(self) -> None:
        self._end_children(signal.SIGKILL)
        super().kill()


def chat(url: str, api_key: str, turn: Turn) -> Attempt:
    async def one() -> Attempt:
        async with new_client(30) as client:
            await drive(client, [url], 0, "json", api_key, turn, time.monotonic() + 10)
            return turn.attempts[-1]

    return asyncio.run(one())


@sqlite_only
def test_sqlite_second_server_refuses_to_start(servers, alice, tmp_path):
    db_file = Path(connection.settings_dict["NAME"]).resolve()
    nonce = uuid.uuid4().hex[:8]
    turns = [Turn("single", f"single-{n}-{nonce}", f"single-{n}-{nonce}") for n in range(4)]

    first = servers()
    assert chat(first.url, alice, turns[0]).body is not None, first.log_text()
    assert lock_holder(db_file) == first.process.pid

    second = Server(log_path=tmp_path / "second.log")
    try:
        with pytest.raises(RuntimeError, match="exited with"):
            second.start()
    finally:
        second.kill()
    refusal = second.log_text()
    assert second.process.returncode not in (None, 0), refusal
    holder = first.process.pid
    assert f"another agentsite server (pid {holder}) is already serving {db_file}" in refusal
    assert "SQLite mode allows one server process per database file" in refusal
    # The first one never noticed.
    assert first.process.poll() is None
    assert lock_holder(db_file) == first.process.pid
    assert chat(first.url, alice, turns[1]).body is not None, first.log_text()
    first.stop()
    assert not lock_is_held(db_file)

    # runserver with its autoreloader: only the serving child takes the lock.
    reloading = ReloadingRunserver(log_path=tmp_path / "runserver.log")
    try:
        reloading.start()
        parent = reloading.process.pid
        (child,) = children_of(parent)
        assert lock_holder(db_file) == child != parent, (lock_holder(db_file), child, parent)
        assert lock_is_held(db_file)
        assert chat(reloading.url, alice, turns[2]).body is not None, reloading.log_text()
        # A management command on the same file while it serves: no lock.
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env={**reloading.env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert migrate.returncode == 0, migrate.stdout + migrate.stderr
        assert "already serving" not in migrate.stdout + migrate.stderr
        assert chat(reloading.url, alice, turns[3]).body is not None, reloading.log_text()
        assert lock_holder(db_file) == child
    finally:
        reloading.stop()
    assert not lock_is_held(db_file)

    result = audit("alice", ["single"], turns)
    assert not result.problems, result.problems
    assert (result.committed, result.pending) == (len(turns), 0)
    assert (result.lost, result.duplicated) == (0, 0)
    report.record(
        "8 SQLite single instance",
        attempted=len(turns),
        committed=result.committed,
        aborted=result.aborted,
        lost=result.lost,
        duplicated=result.duplicated,
    )
