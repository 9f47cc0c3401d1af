"""The running turn (turns_app.execution) and the protocol steps' transaction
rules: claim and start as one unit, the lease keeper, durable steps,
retention after the commit, leases on the database's clock."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import time

import pytest
from django.db import transaction
from django.utils import timezone

from core.errors import SessionBusy
from sessions_app.models import AgentSession
from tests.fixtures.runners import orm
from tests.fixtures.turns import claim_turn, pause_booking
from turns_app import execution, services
from turns_app.models import AgentTurn
from turns_app.services import commit as commit_step

pytestmark = pytest.mark.django_db(transaction=True)


def turns() -> list[AgentTurn]:
    return list(AgentTurn.objects.order_by("number"))


def session_row(key: str = "s1") -> AgentSession:
    return AgentSession.objects.get(owner="alice", key=key)


async def start(text: str, key: str = "s1") -> execution.TurnRun:
    run = await execution.start_turn(
        owner="alice",
        key=key,
        request={"text": text, "client_mode": "chat", "need_form_update": True},
        idempotency_key=None,
    )
    assert isinstance(run, execution.TurnRun)  # no Idempotency-Key: nothing to replay
    return run


# --- bug 1: a claim whose caller went away ---------------------------------------------


async def test_a_claim_whose_caller_is_cancelled_is_aborted_not_orphaned(alice, script, monkeypatch):
    """Django cancels the view when the client disconnects; if that happens
    while the claim runs in its worker thread, the claim still commits. The
    turn it claimed must not keep the session busy with nothing running it."""
    claimed = threading.Event()
    real_claim = services.turn_claim

    def slow_claim(**kwargs):
        result = real_claim(**kwargs)  # committed
        claimed.set()
        time.sleep(0.3)  # the caller is cancelled meanwhile
        return result

    monkeypatch.setattr(execution, "turn_claim", slow_claim)
    caller = asyncio.ensure_future(start("Ada Lovelace"))
    await asyncio.to_thread(claimed.wait, 5)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    monkeypatch.setattr(execution, "turn_claim", real_claim)

    # The session is free at once (not after the lease), and the orphan is aborted.
    deadline = time.monotonic() + 5
    while (await orm(turns))[0].status == AgentTurn.Status.PENDING:
        assert time.monotonic() < deadline, "the orphaned claim was never aborted"
        await asyncio.sleep(0.02)
    (orphan,) = await orm(turns)
    assert orphan.status == AgentTurn.Status.ABORTED and orphan.error["code"] == "turn_cancelled"
    assert (await orm(session_row)).active_turn_id is None
    run = await start("Ada Lovelace")
    assert json.loads(await execution.await_turn(run))["version"] == 1
    assert script.count("reply") == 1  # the orphan never ran the model


# --- bug 3: the lease keeper ----------------------------------------------------------------


async def test_a_failed_renewal_is_logged_and_renewal_goes_on(alice, script, settings, monkeypatch, caplog):
    settings.AGENT_TURN_LEASE_SECONDS = 0.45
    real_renew = services.turn_renew_lease
    calls = []

    def flaky_renew(**kwargs):
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("a bug in renewal")
        return real_renew(**kwargs)

    monkeypatch.setattr(execution, "turn_renew_lease", flaky_renew)
    script.gate = threading.Event()
    run = await start("Ada Lovelace")
    await asyncio.to_thread(script.reply_started.wait, 5)
    await asyncio.sleep(1.2)  # well past one lease: only renewals keep it
    script.gate.set()
    body = json.loads(await execution.await_turn(run))
    assert body["version"] == 1
    assert len(calls) >= 3  # it kept renewing after the failure
    assert "renewing its lease failed" in caplog.text and "a bug in renewal" in caplog.text


async def test_renewals_failing_until_the_lease_runs_out_stop_the_turn(alice, script, settings, monkeypatch, caplog):
    """Not half-alive: once the lease it could not renew has run out, another
    claim may own the session, so the run stops and the turn is aborted."""
    settings.AGENT_TURN_LEASE_SECONDS = 0.3

    def broken_renew(**kwargs):
        raise RuntimeError("renewal is broken")

    monkeypatch.setattr(execution, "turn_renew_lease", broken_renew)
    script.gate = threading.Event()  # the model would run forever
    run = await start("Ada Lovelace")
    started = time.monotonic()
    with pytest.raises(Exception) as raised:  # noqa: PT011  (any type: its code is what is asserted)
        await asyncio.wait_for(execution.await_turn(run), 5)
    assert time.monotonic() - started < 2
    assert getattr(raised.value, "code", None) == "stale_turn"
    script.gate.set()
    (turn,) = await orm(turns)
    assert turn.status == AgentTurn.Status.ABORTED
    assert (await orm(session_row)).active_turn_id is None
    assert "its lease ran out before a renewal got through" in caplog.text
    assert run.log.events[-1].event == "error"


@pytest.mark.parametrize("renews", [False, True], ids=["ends-before-a-renewal", "renews"])
async def test_the_keeper_leaves_nothing_running_when_the_turn_ends(alice, script, monkeypatch, settings, renews):
    """A turn shorter than a third of its lease starts no renewing task at
    all (a timer is cancelled); a longer one's task is awaited. The lease is
    long enough that a loaded machine's late renewal never loses it: the
    turn is held until the keeper's task has started, not for a time."""
    settings.AGENT_TURN_LEASE_SECONDS = 1.5 if renews else 30
    script.gate = threading.Event()
    keepers = []
    started = asyncio.Event()

    class Recorded(execution.LeaseKeeper):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            keepers.append(self)

        def _start(self) -> None:
            super()._start()
            started.set()

    monkeypatch.setattr(execution, "LeaseKeeper", Recorded)
    run = await start("Ada Lovelace")
    await asyncio.to_thread(script.reply_started.wait, 30)
    if renews:
        await started.wait()
    script.gate.set()
    await execution.await_turn(run)
    (keeper,) = keepers
    if renews:
        assert keeper.task is not None and keeper.task.done()
    else:
        assert not started.is_set()
        assert keeper.task is None


# --- transactions -------------------------------------------------------------------------


@pytest.mark.parametrize("step", ["turn_claim", "turn_renew_lease", "turn_commit", "turn_abort"])
def test_protocol_steps_refuse_to_run_inside_another_transaction(transactional_db, step):
    """Durable: nested in a caller's transaction, a step's commit would only
    be a savepoint, and "committed" would not mean committed."""
    kwargs = {
        "turn_claim": {"owner": "alice", "key": "s1", "request": {}, "idempotency_key": None},
        "turn_renew_lease": {"turn_id": None},
        "turn_commit": {"turn_id": None, "outcome": None},
        "turn_abort": {"turn_id": None, "code": "x", "message": "x"},
    }[step]
    with transaction.atomic(), pytest.raises(RuntimeError, match="durable"):
        getattr(services, step)(**kwargs)


async def test_a_failing_drop_of_an_answered_pause_never_aborts_a_good_turn(api, script, monkeypatch, caplog):
    await pause_booking(api, "b1")

    def broken(thread_ids, **kwargs):
        raise RuntimeError("drop failed")

    monkeypatch.setattr(commit_step, "delete_threads", broken)
    response = await api.call("POST", "/sessions/b1/turns", {"resume": {"action": "approve"}})
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["status"] == "committed"
    assert "drop failed" in caplog.text


async def test_an_answered_pause_is_dropped_after_the_commit_released_the_session(api, script, monkeypatch):
    await pause_booking(api, "b1")
    seen = []
    real = commit_step.delete_threads

    def observing(thread_ids, **kwargs):
        row = session_row("b1")
        seen.append((row.active_turn_id, row.version, row.interrupt))
        return real(thread_ids, **kwargs)

    monkeypatch.setattr(commit_step, "delete_threads", observing)
    assert (await api.call("POST", "/sessions/b1/turns", {"resume": {"action": "approve"}})).status_code == 200
    # Committed, released and no longer paused before housekeeping started.
    assert seen == [(None, 2, None)]


async def test_leases_follow_the_database_clock_not_the_host_clock(alice, script, monkeypatch):
    """A host whose clock runs an hour ahead must not think a live lease expired."""
    claim = await claim_turn("s1", "Ada Lovelace")
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + dt.timedelta(hours=1))
    with pytest.raises(SessionBusy):
        await claim_turn("s1", "again")
    assert await orm(services.turns_expire_dead) == 0
    (turn,) = await orm(turns)
    assert turn.id == claim.turn_id and turn.status == AgentTurn.Status.PENDING
    row = await orm(session_row)
    assert row.lease_expires_at < real_now() + dt.timedelta(minutes=5)
