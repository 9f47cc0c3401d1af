"""The failure windows with real processes (docs/invariants.md, "Failure
windows"): a daphne process serving the test database is SIGKILLed at each
window (turns_app.faults, reachable only under tests.settings), restarted,
and the database rows are checked afterwards.

On SQLite the restarted server aborts every pending turn at start-up; on
PostgreSQL nothing does that, so a dead turn holds its session until its
lease runs out. The lease a dead turn holds is the one its *own* server gave
it, so the servers that die here run with a short AGENT_TURN_LEASE_SECONDS.

Every HTTP call has a timeout and every wait a deadline; the `servers`
fixture (tests/system/server.py) kills what is left. Each scenario records
one row of the failure-window report after its assertions held.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection
from httpx_sse import ServerSentEvent, connect_sse

from core.database import is_postgres
from graphs.booking.models import Booking
from sessions_app.models import AgentSession
from tests.system import report
from tests.system.server import ROOT, Server
from turns_app import faults, history
from turns_app.checkpoint_tables import checkpoint_tables
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

OWNER = "alice"
KEY = "s1"
# Ceilings, not targets: on a loaded machine a start, a turn or a death
# takes many times what it takes on an idle one.
HTTP_TIMEOUT = httpx.Timeout(120.0, connect=30.0)
DEATH_SECONDS = 60.0
WAIT_SECONDS = 60.0
FAULT_ENV = ("AGENT_FAULT_POINT", "AGENT_FAULT_ACTION")
# What the session row holds for the business; the lease columns move with
# every claim and are checked separately.
BUSINESS = ("version", "epoch", "fields", "stage", "head_turn_id", "interrupt", "turn_count", "deleted_at")


def on_postgres() -> bool:
    return is_postgres(connection.settings_dict)


# --- servers ---------------------------------------------------------------------


@pytest.fixture
def launch(servers) -> Iterator[Callable[..., Server]]:
    """`servers`, plus: every process is gone at the end (asserted), and the
    SQLite `.lock` file agentsite.startup leaves behind is removed once no
    process holds it."""
    started: list[Server] = []

    def start(**env: str) -> Server:
        server = servers(**env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    assert all(s.process is None or s.process.poll() is not None for s in started)
    remove_sqlite_lock()


def remove_sqlite_lock() -> None:
    if on_postgres():
        return
    name = Path(connection.settings_dict["NAME"])
    lock = name.with_name(name.name + ".lock")
    if not lock.exists():
        return
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a server still holds it: not ours to remove
        lock.unlink()


def without_faults(server: Server, **env: str) -> Server:
    """Restart with the fault hooks' environment removed."""
    for name in FAULT_ENV:
        server.env.pop(name, None)
    server.env.update(env)
    return server.restart()


def assert_killed(server: Server) -> float:
    """The process died of SIGKILL (the injected crash); returns when."""
    code = server.process.wait(DEATH_SECONDS)
    assert code == -signal.SIGKILL, f"exit {code}:\n{server.log_text()}"
    return time.monotonic()


# --- HTTP ------------------------------------------------------------------------------


@contextmanager
def client_of(server: Server, api_key: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT, headers=headers) as client:
        yield client


def chat(client: httpx.Client, text: str, *, idem: str | None = None, key: str = KEY) -> httpx.Response:
    headers = {"Idempotency-Key": idem} if idem else {}
    return client.post(f"/api/sessions/{key}/turns", json={"text": text}, headers=headers)


def committed(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json()


def expect_dropped(send: Callable[[], Any]) -> None:
    """The server died mid-request: the connection drops, no response."""
    with pytest.raises(httpx.TransportError) as info:
        send()
    assert not isinstance(info.value, httpx.TimeoutException), "timed out instead of dropping"


def read_stream(
    client: httpx.Client,
    text: str,
    *,
    on_event: Callable[[ServerSentEvent], None] | None = None,
    idem: str | None = None,
) -> tuple[httpx.Response, list[ServerSentEvent]]:
    """POST …/turns/stream and collect the events until the stream ends (a
    dropped connection raises; `on_event` has seen the events before it)."""
    events: list[ServerSentEvent] = []
    headers = {"Idempotency-Key": idem} if idem else {}
    path = f"/api/sessions/{KEY}/turns/stream"
    with connect_sse(client, "POST", path, json={"text": text}, headers=headers) as source:
        response = source.response
        if response.status_code != 200:
            response.read()
            return response, events
        for event in source.iter_sse():
            events.append(event)
            if on_event is not None:
                on_event(event)
        return response, events


def names(events: list[ServerSentEvent]) -> list[str]:
    return [e.event for e in events]


# --- database ----------------------------------------------------------------------------


def session_row(key: str = KEY) -> AgentSession:
    return AgentSession.objects.get(owner=OWNER, key=key)


def business(session: AgentSession) -> dict[str, Any]:
    return {name: getattr(session, name) for name in BUSINESS}


def turns_of(session: AgentSession) -> list[AgentTurn]:
    return list(AgentTurn.objects.filter(session=session).order_by("epoch", "number"))


def checkpoint_rows_by_table(prefix: str) -> dict[str, int]:
    """Rows in each checkpointer table whose thread starts with `prefix`."""
    counts = {}
    with connection.cursor() as cursor:
        for table in checkpoint_tables():
            cursor.execute(
                f"SELECT count(*) FROM {connection.ops.quote_name(table)} WHERE thread_id LIKE %s",
                [prefix + "%"],
            )
            counts[table] = cursor.fetchone()[0]
    return counts


def checkpoint_rows(prefix: str) -> int:
    return sum(checkpoint_rows_by_table(prefix).values())


def transcript(session: AgentSession) -> list[dict[str, Any]]:
    return history.transcript(session.head_turn_id)


def wait_until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# --- the report --------------------------------------------------------------------------


def tally(acknowledged: list[dict[str, Any]], key: str = KEY) -> dict[str, int]:
    """From the database: `lost` = turns the client was told are done (a 200
    or an SSE `done`) of the session's current epoch that are not committed,
    or whose messages are not in the transcript exactly as the turn stored
    them; `duplicated` = committed turns with more messages in the transcript
    than they added. (Turns of an epoch the client deleted are gone on
    purpose.)"""
    session = session_row(key)
    rows = turns_of(session)
    finished = ("committed", "interrupted")
    added = {str(t.id): len(t.messages) for t in rows if t.status in finished and t.epoch == session.epoch}
    shown = Counter(m["turn_id"] for m in transcript(session))
    mine = [a["turn_id"] for a in acknowledged if a["epoch"] == session.epoch]
    return {
        "committed": sum(t.status in finished for t in rows),
        "aborted": sum(t.status == "aborted" for t in rows),
        "lost": sum(t not in added or shown[t] != added[t] or not added[t] for t in mine),
        "duplicated": sum(shown[t] > n for t, n in added.items()),
    }


def check_and_record(scenario: str, *, attempted: int, acknowledged, recovery: float | None, **override) -> dict:
    counts = {**tally(acknowledged), **override}
    session = session_row()
    # Every committed turn of this epoch is in the transcript, and nothing else is.
    in_transcript = {m["turn_id"] for m in transcript(session)}
    assert in_transcript == {
        str(t.id) for t in turns_of(session) if t.status in ("committed", "interrupted") and t.epoch == session.epoch
    }
    assert not AgentTurn.objects.filter(session=session, status="pending").exists()
    assert counts["lost"] == 0 and counts["duplicated"] == 0, counts
    report.record(scenario, attempted=attempted, recovery_seconds=recovery, **counts)
    return counts


# --- 1. the run finished, business commit not ------------------------------------------------


def test_crash_after_the_run_before_commit(launch, alice):
    # The lease a dead turn holds is the one its own server granted: short,
    # so on PostgreSQL the next claim can expire it soon after the crash.
    server = launch(AGENT_TURN_LEASE_SECONDS="1")
    acknowledged = []
    with client_of(server, alice) as client:
        acknowledged += [committed(chat(client, "hello")), committed(chat(client, "Ada Lovelace"))]
    before = business(session_row())

    server.restart(AGENT_FAULT_POINT="before_commit", AGENT_FAULT_ACTION="kill")
    with client_of(server, alice) as client:
        expect_dropped(lambda: chat(client, "ada@example.com"))
    crashed_at = assert_killed(server)

    session = session_row()
    lost = turns_of(session)[-1]
    assert lost.status == "pending" and session.active_turn_id == lost.id
    # The window: the run finished, the business commit did not. A finished
    # run's checkpoints live in its process's memory: nothing of it landed.
    assert checkpoint_rows(lost.checkpoint_thread) == 0
    assert business(session) == before

    without_faults(server, AGENT_SESSION_WAIT_SECONDS="10")
    lost.refresh_from_db()
    if on_postgres():
        # Other servers may share the database: start-up leaves it to its lease.
        assert lost.status == "pending"
    else:
        # Start-up (single-process mode) aborted it before any request.
        assert (lost.status, lost.error["code"]) == ("aborted", "server_restarted")
        assert session_row().active_turn_id is None
    with client_of(server, alice) as client:
        after = committed(chat(client, "2031-05-06"))
        recovered_at = time.monotonic()
        messages = client.get(f"/api/sessions/{KEY}/messages").json()
        info = client.get(f"/api/sessions/{KEY}").json()
    acknowledged.append(after)

    lost.refresh_from_db()
    expected_code = "lease_expired" if on_postgres() else "server_restarted"
    assert (lost.status, lost.error["code"]) == ("aborted", expected_code)
    # The next turn started from the last committed state.
    assert after["version"] == info["version"] == before["version"] + 1
    assert AgentTurn.objects.get(pk=after["turn_id"]).base_version == before["version"]
    assert after["field_changes"] == {"preferred_date": "2031-05-06"}
    assert after["fields"] == {"name": "Ada Lovelace", "preferred_date": "2031-05-06"}
    assert "ada@example.com" not in json.dumps(messages)
    assert [m["turn_id"] for m in messages] == [a["turn_id"] for a in acknowledged for _ in "ua"]
    assert checkpoint_rows(f"{session.id}:") == 0

    check_and_record(
        "1 crash before commit",
        attempted=4,
        acknowledged=acknowledged,
        recovery=recovered_at - crashed_at,
    )


# --- 2. business committed, response not sent ------------------------------------------------


def test_crash_after_commit_before_response(launch, alice):
    server = launch()
    with client_of(server, alice) as client:
        acknowledged = [committed(chat(client, "hello"))]

    server.restart(AGENT_FAULT_POINT="after_commit", AGENT_FAULT_ACTION="kill")
    with client_of(server, alice) as client:
        # Streamed, so the turn has deltas (a JSON turn streams none).
        expect_dropped(lambda: read_stream(client, "Ada Lovelace", idem="retry-1"))
    crashed_at = assert_killed(server)

    session = session_row()
    turn = AgentTurn.objects.get(session=session, idempotency_key="retry-1")
    assert turn.status == "committed" and session.version == 2 and turn.result
    rows_before = AgentTurn.objects.count()
    checkpoints_before = checkpoint_rows(f"{session.id}:")

    without_faults(server)
    with client_of(server, alice) as client:
        retry = chat(client, "Ada Lovelace", idem="retry-1")
        recovered_at = time.monotonic()
        response, events = read_stream(client, "Ada Lovelace", idem="retry-1")
        conflict = chat(client, "Grace Hopper", idem="retry-1")

    # The stored result, byte for byte, flagged as a replay.
    assert retry.status_code == 200
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.content == turn.result.encode()
    # The stream replays its logged events too (the commit wrote those not
    # yet written), ending in `done` with the stored body.
    assert response.status_code == 200 and response.headers["idempotent-replayed"] == "true"
    assert names(events)[:3] == ["turn", "fields", "delta"] and names(events)[-1] == "done"
    assert [int(e.id) for e in events] == list(range(1, len(events) + 1))
    assert "".join(json.loads(e.data)["text"] for e in events if e.event == "delta") == json.loads(turn.result)["reply"]
    assert events[-1].data == turn.result
    assert json.loads(events[0].data)["turn_id"] == str(turn.id)
    assert (conflict.status_code, conflict.json()["error"]["code"]) == (409, "idempotency_conflict")
    # No model call: a model runs only inside a run, a run only for a claim,
    # and a claim always inserts a `pending` turn row; and a run always ends
    # by writing a checkpoint on its own thread. Neither happened, and the
    # version did not move.
    assert AgentTurn.objects.count() == rows_before
    assert checkpoint_rows(f"{session.id}:") == checkpoints_before
    assert session_row().version == 2
    acknowledged.append(json.loads(turn.result))

    check_and_record(
        "2 crash after commit",
        attempted=2,
        acknowledged=acknowledged,
        recovery=recovered_at - crashed_at,
    )


# --- 3. business committed, checkpoint missing or behind ----------------------------------------


def test_a_pause_survives_a_killed_server_and_resumes_once(launch, alice):
    """A booking turn paused for approval (committed as `interrupted`, its
    checkpoint in the database); the server is SIGKILLed; after the restart
    the resume runs from that checkpoint and the booking lands exactly once —
    also when the first resume's server is killed after the tool ran and
    before the commit, and the client retries with the same key."""
    server = launch(AGENT_TURN_LEASE_SECONDS="1")
    with client_of(server, alice) as client:
        assert client.post("/api/sessions", json={"key": KEY, "graph": "booking"}).status_code == 201
        paused = committed(chat(client, "Book a table for 3 people on 2031-06-01 at 20:00, my name is Ada Lovelace"))
    assert (
        paused["status"] == "interrupted"
        and paused["interrupts"][0]["value"]["action_requests"][0]["name"] == "book_table"
    )
    server.kill()
    crashed_at = time.monotonic()
    assert checkpoint_rows(f"{session_row().id}:") > 0  # the pause is durable

    server.restart(AGENT_FAULT_POINT="before_commit", AGENT_FAULT_ACTION="kill")
    with client_of(server, alice) as client:
        expect_dropped(
            lambda: client.post(
                f"/api/sessions/{KEY}/turns",
                json={"resume": {"decisions": [{"type": "approve"}]}},
                headers={"Idempotency-Key": "ok-1"},
            )
        )
    assert_killed(server)
    assert not Booking.objects.exists()  # the tool ran; its effect waits for a commit that never came

    without_faults(server, AGENT_SESSION_WAIT_SECONDS="10")
    if on_postgres():
        wait_until(
            lambda: session_row().lease_expires_at is None or time.time() > session_row().lease_expires_at.timestamp(),
            WAIT_SECONDS,
            "the dead resume's lease",
        )
    with client_of(server, alice) as client:
        resumed = committed(
            client.post(
                f"/api/sessions/{KEY}/turns",
                json={"resume": {"decisions": [{"type": "approve"}]}},
                headers={"Idempotency-Key": "ok-1"},
            )
        )
        recovered_at = time.monotonic()
        again = client.post(
            f"/api/sessions/{KEY}/turns",
            json={"resume": {"decisions": [{"type": "approve"}]}},
            headers={"Idempotency-Key": "ok-1"},
        )
        late = client.post(f"/api/sessions/{KEY}/turns", json={"resume": {"decisions": [{"type": "approve"}]}})
    assert resumed["status"] == "committed" and "booked" in resumed["reply"]
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert (late.status_code, late.json()["error"]["code"]) == (409, "interrupt_resolved")
    (booking,) = Booking.objects.all()
    assert resumed["effects"] == [
        {"kind": "booking.create", "result": {"booking_id": str(booking.id), "reference": booking.reference}}
    ]
    assert (booking.name, booking.party_size) == ("Ada Lovelace", 3)
    assert session_row().interrupt is None
    assert checkpoint_rows(f"{session_row().id}:") == 0  # the answered pause is dropped

    check_and_record(
        "3 pause across a kill",
        attempted=3,
        acknowledged=[paused, resumed],
        recovery=recovered_at - crashed_at,
        bookings=Booking.objects.count(),
    )


# --- 4. crash mid-stream ----------------------------------------------------------------------


def test_crash_mid_stream(launch, alice):
    server = launch(AGENT_TURN_LEASE_SECONDS="1", AGENT_OFFLINE_TOKEN_DELAY_MS="50")
    with client_of(server, alice) as client:
        acknowledged = [committed(chat(client, "hello"))]
    before = business(session_row())
    before_messages = transcript(session_row())

    server.restart(AGENT_FAULT_POINT="mid_stream", AGENT_FAULT_ACTION="kill")
    received: list[ServerSentEvent] = []
    with client_of(server, alice) as client, pytest.raises(httpx.TransportError) as info:
        read_stream(client, "Ada Lovelace", on_event=received.append)
    assert not isinstance(info.value, httpx.TimeoutException)
    crashed_at = assert_killed(server)
    seen = names(received)
    assert seen[:1] == ["turn"] and "done" not in seen and "error" not in seen, seen
    turn_id = json.loads(received[0].data)["turn_id"]
    assert AgentTurn.objects.get(pk=turn_id).status == "pending"
    assert business(session_row()) == before

    without_faults(server, AGENT_SESSION_WAIT_SECONDS="10")
    if on_postgres():
        wait_until(
            lambda: session_row().lease_expires_at is None or time.time() > session_row().lease_expires_at.timestamp(),
            WAIT_SECONDS,
            "the dead turn's lease",
        )
    with client_of(server, alice) as client:
        info_after = client.get(f"/api/sessions/{KEY}").json()
        messages_after = client.get(f"/api/sessions/{KEY}/messages").json()
        next_turn = committed(chat(client, "Grace Hopper"))
        recovered_at = time.monotonic()
    acknowledged.append(next_turn)

    # As before the turn: same business state, seen through the API too.
    assert (info_after["version"], info_after["fields"], info_after["stage"]) == (
        before["version"],
        before["fields"],
        before["stage"],
    )
    assert messages_after == before_messages
    dead = AgentTurn.objects.get(pk=turn_id)
    expected_code = "lease_expired" if on_postgres() else "server_restarted"
    assert (dead.status, dead.error["code"]) == ("aborted", expected_code)
    assert next_turn["version"] == before["version"] + 1
    assert next_turn["fields"] == {"name": "Grace Hopper"}
    assert "Ada Lovelace" not in json.dumps(transcript(session_row()))
    assert checkpoint_rows(dead.checkpoint_thread) == 0

    check_and_record(
        "4 crash mid-stream",
        attempted=3,
        acknowledged=acknowledged,
        recovery=recovered_at - crashed_at,
    )


# --- 5. a dead turn holds the session only until its lease ends --------------------------------


def test_lease_expiry_after_a_dead_process(launch, alice):
    lease = 2.0
    server = (
        launch(AGENT_OFFLINE_TOKEN_DELAY_MS="200", AGENT_TURN_LEASE_SECONDS=str(lease))
        if on_postgres()
        else launch(AGENT_OFFLINE_TOKEN_DELAY_MS="200")
    )
    # PostgreSQL: a second server is up before the first dies, so the chat
    # sent right after the crash shows the wait for the lease, not a restart.
    other = launch(AGENT_TURN_LEASE_SECONDS=str(lease), AGENT_SESSION_WAIT_SECONDS="10") if on_postgres() else None
    killed: list[float] = []

    def kill_on_first_delta(event: ServerSentEvent) -> None:
        if event.event == "delta" and not killed:
            server.kill()
            killed.append(time.monotonic())

    with client_of(server, alice) as client, pytest.raises(httpx.TransportError):
        read_stream(client, "hello, I would like to book a table", on_event=kill_on_first_delta)
    assert killed, "the turn never streamed a delta"
    crashed_at = killed[0]
    assert server.process.returncode == -signal.SIGKILL

    session = session_row()
    (dead,) = turns_of(session)
    assert dead.status == "pending" and session.active_turn_id == dead.id
    dead_lease_ends = session.lease_expires_at

    if on_postgres():
        assert dead_lease_ends is not None
        with client_of(other, alice) as client:
            sent = time.monotonic()
            after = committed(chat(client, "ada@example.com"))
            recovered_at = time.monotonic()
        new_turn = AgentTurn.objects.get(pk=after["turn_id"])
        # It waited for the lease (claimed only after it ended) and no longer.
        assert new_turn.created_at >= dead_lease_ends
        assert recovered_at - crashed_at <= lease + 3.0
        expected_code = "lease_expired"
    else:
        server.env["AGENT_OFFLINE_TOKEN_DELAY_MS"] = "0"
        server.restart()
        dead.refresh_from_db()
        # Start-up cleared it at once, though its lease (default 30 s) runs on.
        assert (dead.status, dead.error["code"]) == ("aborted", "server_restarted")
        assert dead_lease_ends is not None and dead_lease_ends.timestamp() > time.time()
        with client_of(server, alice) as client:
            sent = time.monotonic()
            after = committed(chat(client, "ada@example.com"))
            recovered_at = time.monotonic()
        assert recovered_at - sent < 2.0  # no wait for a lease
        expected_code = "server_restarted"
    dead.refresh_from_db()
    assert (dead.status, dead.error["code"]) == ("aborted", expected_code)
    assert after["version"] == 1 and after["fields"] == {"email": "ada@example.com"}
    print(
        f"\nlease recovery ({report.database_kind()}): crash -> committed "
        f"{recovered_at - crashed_at:.2f} s, chat latency {recovered_at - sent:.2f} s"
    )

    check_and_record("5 lease expiry", attempted=2, acknowledged=[after], recovery=recovered_at - crashed_at)


# --- 9. delete racing a running turn ------------------------------------------------------


@pytest.mark.parametrize("fenced_at", ["commit", "lease_renewal"])
def test_delete_racing_a_running_turn(launch, alice, fenced_at):
    # A short lease is renewed (and so checked) every lease/3 s, long before
    # the slow reply ends; a long one lets the run reach its commit.
    lease = "0.6" if fenced_at == "lease_renewal" else "30"
    server = launch(AGENT_OFFLINE_TOKEN_DELAY_MS="100", AGENT_TURN_LEASE_SECONDS=lease)
    with client_of(server, alice) as client:
        acknowledged = [committed(chat(client, "hello"))]
    before = session_row()
    deleted: list[httpx.Response] = []

    with client_of(server, alice) as client, client_of(server, alice) as admin:

        def delete_on_first_delta(event: ServerSentEvent) -> None:
            if event.event == "delta" and not deleted:
                deleted.append(admin.delete(f"/api/sessions/{KEY}"))

        response, events = read_stream(client, "Ada Lovelace", on_event=delete_on_first_delta)
        assert response.status_code == 200
        assert deleted and deleted[0].status_code == 204, deleted
        seen = names(events)
        assert "done" not in seen and seen[-1] == "error", seen
        error = json.loads(events[-1].data)
        assert error["code"] == "stale_turn"
        # Which fence caught it: the commit (the turn row is gone) or a
        # lease renewal (which cancels the run mid-reply).
        because = "deleted" if fenced_at == "commit" else "lost its lease"
        assert because in error["message"], error
        racing = json.loads(events[0].data)
        assert racing["epoch"] == before.epoch

        # The tombstone holds: epoch + 1, version kept, everything else gone.
        tomb = session_row()
        assert tomb.deleted_at is not None
        assert (tomb.epoch, tomb.version) == (before.epoch + 1, before.version)
        assert (tomb.fields, tomb.head_turn_id, tomb.active_turn_id) == ({}, None, None)
        assert not AgentTurn.objects.filter(session=tomb).exists()
        # Nothing of the deleted epoch survives. The `error` event goes out
        # before the runner's abort, which drops what the cancelled run wrote,
        # so this holds a moment after the stream ends.
        wait_until(
            lambda: sum(checkpoint_rows_by_table(f"{tomb.id}:{before.epoch}:").values()) == 0,
            WAIT_SECONDS,
            "the deleted epoch's checkpoint rows to be purged",
        )
        assert client.get(f"/api/sessions/{KEY}").status_code == 404

        started = time.monotonic()
        fresh = committed(chat(client, "ada@example.com"))
        recovery = time.monotonic() - started
    acknowledged.append(fresh)

    # The chat re-created the session, which moves the version on by one
    # (docs/api.md, "Sessions"), then committed its turn.
    assert (fresh["epoch"], fresh["version"]) == (before.epoch + 1, before.version + 2)
    assert fresh["fields"] == {"email": "ada@example.com"}  # nothing of epoch 1
    session = session_row()
    assert session.deleted_at is None
    (turn,) = turns_of(session)
    assert (turn.epoch, turn.number, turn.base_version) == (before.epoch + 1, 1, before.version + 1)
    assert checkpoint_rows(f"{session.id}:{before.epoch}:") == 0
    # Turns committed across epochs: the version counts them and the one
    # re-creation (no set-fields here). The racing turn's row went with the
    # delete; it was fenced (`stale_turn`).
    check_and_record(
        f"9 delete racing a turn ({fenced_at})",
        attempted=3,
        acknowledged=acknowledged,
        recovery=recovery,
        committed=session.version - 1,
        aborted=1,
    )


# --- the hooks are off outside test settings ---------------------------------------------------


@pytest.mark.parametrize("point", sorted(faults.POINTS))
def test_fault_hooks_are_off_under_production_settings(launch, alice, point):
    """agentsite.settings (production) with the fault environment set: a
    chat passes every point, commits, and the process lives on."""
    server = launch(
        DJANGO_SETTINGS_MODULE="agentsite.settings",
        AGENT_FAULT_POINT=point,
        AGENT_FAULT_ACTION="kill",
    )
    with client_of(server, alice) as client:
        first = committed(chat(client, "Ada Lovelace"))
        second = committed(chat(client, "ada@example.com"))
        response, events = read_stream(client, "2031-05-06")
    assert response.status_code == 200 and names(events)[-1] == "done"
    assert server.process.poll() is None, server.log_text()
    assert [first["version"], second["version"], json.loads(events[-1].data)["version"]] == [1, 2, 3]
    assert [t.status for t in turns_of(session_row())] == ["committed"] * 3


def test_fault_hit_is_a_no_op_unless_test_settings_enable_it(settings, monkeypatch):
    monkeypatch.setenv("AGENT_FAULT_ACTION", "raise")  # never SIGKILL the test runner
    settings.AGENT_FAULT_INJECTION = False
    for point in faults.POINTS:
        monkeypatch.setenv("AGENT_FAULT_POINT", point)
        faults.hit(point)  # no-op
    # Positive control: the same environment fires under test settings.
    settings.AGENT_FAULT_INJECTION = True
    with pytest.raises(faults.InjectedFault):
        faults.hit(point)
    # And the environment cannot switch it on in production settings.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import django; django.setup(); from django.conf import settings; "
                "from turns_app import faults; print(settings.AGENT_FAULT_INJECTION, faults.enabled())"
            ),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "agentsite.settings",
            "AGENT_FAULT_INJECTION": "true",
            "AGENT_FAULT_POINT": "before_commit",
        },
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["False", "False"]
