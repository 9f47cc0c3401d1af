"""A chat that finds its session busy starts as soon as the turn holding it
ends — woken by that end, not by a polling timer (the same-session tail
target of docs/scale.md, "Targets"). The cap on each wait is raised far beyond what the tests allow, so
only a wake-up can make the waiter start in time."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from core.errors import SessionBusy
from tests.fixtures.runners import orm
from tests.fixtures.turns import claim_turn, make_outcome
from turns_app import execution, services, session_wait
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

# A polling waiter would claim again only after its next timer (here: the
# cap), and be refused again and again while it waits.
CAP_SECONDS = 5.0
# Generous for a loaded 2-core machine; far below the cap.
PROMPT_SECONDS = 0.5


@pytest.fixture
def timed(monkeypatch, settings):
    """Records when each claim went through and when each commit/abort returned."""
    settings.AGENT_SESSION_WAIT_SECONDS = 30
    monkeypatch.setattr(session_wait, "WAIT_CAP_SECONDS", CAP_SECONDS)
    monkeypatch.setattr(session_wait, "FIRST_POLL_SECONDS", CAP_SECONDS)
    times: dict[str, list[float]] = {"claimed": [], "refused": [], "ended": []}
    real_claim, real_commit = services.turn_claim, services.turn_commit

    def claim(**kwargs):
        try:
            result = real_claim(**kwargs)
        except Exception:
            times["refused"].append(time.monotonic())
            raise
        times["claimed"].append(time.monotonic())
        return result

    def commit(**kwargs):
        body = real_commit(**kwargs)
        times["ended"].append(time.monotonic())
        return body

    monkeypatch.setattr(execution, "turn_claim", claim)
    monkeypatch.setattr(execution, "turn_commit", commit)
    return times


async def start(text: str) -> execution.TurnRun:
    run = await execution.start_turn(
        owner="alice",
        key="s1",
        request={"text": text, "client_mode": "chat", "need_form_update": True},
        idempotency_key=None,
    )
    assert isinstance(run, execution.TurnRun)  # no Idempotency-Key: nothing to replay
    return run


async def refused_once(times) -> None:
    deadline = time.monotonic() + 5
    while not times["refused"]:
        assert time.monotonic() < deadline, "the waiter never tried to claim"
        await asyncio.sleep(0.01)


async def test_a_waiter_starts_when_the_holder_here_commits(alice, script, timed):
    script.gate = threading.Event()
    holder = await start("Ada Lovelace")
    await asyncio.to_thread(script.reply_started.wait, 5)
    waiter = asyncio.ensure_future(start("ada@example.com"))
    await refused_once(timed)
    await asyncio.sleep(0.6)  # the waiter is waiting now, not on its first try
    script.gate.set()
    assert json.loads(await execution.await_turn(holder))["version"] == 1
    run = await asyncio.wait_for(waiter, 5)
    assert json.loads(await execution.await_turn(run))["version"] == 2
    assert timed["claimed"][1] - timed["ended"][0] < PROMPT_SECONDS, timed
    assert len(timed["refused"]) == 1  # woken once, by the end: no polling


async def test_a_waiter_starts_when_a_holder_elsewhere_ends(alice, script, timed):
    """A holder this process does not run (another server's turn): its final
    event, written by the commit, wakes the waiter (NOTIFY on PostgreSQL)."""
    claim = await claim_turn("s1", "Ada Lovelace")
    waiter = asyncio.ensure_future(start("ada@example.com"))
    await refused_once(timed)
    await asyncio.sleep(0.6)
    await orm(services.turn_commit, turn_id=claim.turn_id, outcome=make_outcome(claim), claim=claim)
    ended = time.monotonic()
    run = await asyncio.wait_for(waiter, 5)
    assert json.loads(await execution.await_turn(run))["version"] == 2
    assert timed["claimed"][-1] - ended < PROMPT_SECONDS, timed
    # Refused, then refused once more under the subscription (the holder may
    # have ended in between), then woken by the end: no polling in between.
    assert len(timed["refused"]) <= 2, timed


async def test_a_waiter_starts_when_a_holder_elsewhere_aborts(alice, script, timed):
    claim = await claim_turn("s1", "Ada Lovelace")
    waiter = asyncio.ensure_future(start("ada@example.com"))
    await refused_once(timed)
    await asyncio.sleep(0.6)
    await orm(services.turn_abort, turn_id=claim.turn_id, code="turn_cancelled", message="gone")
    ended = time.monotonic()
    run = await asyncio.wait_for(waiter, 5)
    assert json.loads(await execution.await_turn(run))["version"] == 1
    assert timed["claimed"][-1] - ended < PROMPT_SECONDS, timed
    # Refused, then refused once more under the subscription (the holder may
    # have ended in between), then woken by the end: no polling in between.
    assert len(timed["refused"]) <= 2, timed
    statuses = await orm(lambda: sorted(AgentTurn.objects.values_list("status", flat=True)))
    assert statuses == ["aborted", "committed"]


async def test_without_a_wake_up_the_cap_still_claims_again(alice, script, timed, monkeypatch):
    """A lost wake-up (a dropped LISTEN connection) costs the cap, not the turn."""
    monkeypatch.setattr(session_wait, "WAIT_CAP_SECONDS", 0.3)

    class Deaf:
        async def wait(self, timeout):
            await asyncio.sleep(timeout)
            return False

    class NoSubscription:
        def __init__(self, *args, **kwargs):
            pass

        async def __aenter__(self):
            return Deaf()

        async def __aexit__(self, *exc):
            return False

    monkeypatch.setattr(session_wait.wakeups, "subscription", NoSubscription)
    claim = await claim_turn("s1", "Ada Lovelace")
    waiter = asyncio.ensure_future(start("ada@example.com"))
    await refused_once(timed)
    await orm(services.turn_abort, turn_id=claim.turn_id, code="turn_cancelled", message="gone")
    run = await asyncio.wait_for(waiter, 5)
    assert json.loads(await execution.await_turn(run))["version"] == 1


async def test_waiters_of_one_session_claim_in_the_order_they_came(settings):
    """Woken together when the holder ended, waiters raced for the row lock
    and a loser waited again: one client could wait many turns in a row
    (the same-session p99). In one process they now queue."""
    settings.AGENT_SESSION_WAIT_SECONDS = 30
    lock = threading.Lock()
    holder: list = [None]
    order: list[int] = []
    running: dict = {}

    def claim(*, owner: str, key: str, name: int):
        with lock:
            if holder[0] is not None:
                raise SessionBusy(holder=holder[0])
            holder[0] = object()
            order.append(name)
            return holder[0]

    async def run_turn(turn) -> None:
        await asyncio.sleep(0.03)
        with lock:
            holder[0] = None

    async def client(name: int) -> None:
        turn = await session_wait.claim_when_free(claim, running=running.get, owner="alice", key="s1", name=name)
        running[turn] = asyncio.ensure_future(run_turn(turn))

    clients = []
    for name in range(6):
        clients.append(asyncio.ensure_future(client(name)))
        await asyncio.sleep(0.01)  # arrival order: 0, 1, 2, …
    await asyncio.wait_for(asyncio.gather(*clients), 10)
    await asyncio.gather(*running.values())
    assert order == list(range(6))
    assert not session_wait._Turnstile._open, "an idle session keeps no queue"
