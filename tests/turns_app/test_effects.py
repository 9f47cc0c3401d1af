"""Tools whose side effects happen once (docs/graphs.md, "Effects"): a tool records an effect,
the turn's commit applies it in its transaction. Committed turn ⇒ its
effects exactly once; aborted, fenced, cancelled or replayed ⇒ none."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from graphs.booking.models import Booking
from graphs.runtime import effects
from tests.fixtures.runners import orm
from tests.fixtures.turns import pause_booking
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

APPROVE = {"resume": {"decisions": [{"type": "approve"}]}}


def bookings() -> list[Booking]:
    return list(Booking.objects.order_by("created_at"))


def body(response) -> dict:
    return json.loads(response.content)


async def resume(api, key: str, answer: dict, idem: str | None = None):
    headers = {"Idempotency-Key": idem} if idem else None
    return await api.call("POST", f"/sessions/{key}/turns", answer, headers)


async def test_a_committed_turn_leaves_exactly_the_bookings_it_reported(api, script):
    await pause_booking(api, "b1")
    assert await orm(bookings) == []  # the tool has not run: it waits for approval
    done = body(await resume(api, "b1", APPROVE, idem="ok"))
    (booking,) = await orm(bookings)
    assert done["effects"] == [
        {"kind": "booking.create", "result": {"booking_id": str(booking.id), "reference": booking.reference}}
    ]
    assert (booking.name, str(booking.date), booking.time.strftime("%H:%M"), booking.party_size) == (
        "Ada Lovelace",
        "2031-05-01",
        "19:30",
        2,
    )
    assert str(booking.turn_id) == done["turn_id"]
    # A replay creates none.
    again = await resume(api, "b1", APPROVE, idem="ok")
    assert again.headers["Idempotent-Replayed"] == "true" and body(again) == done
    assert len(await orm(bookings)) == 1


async def test_a_turn_that_fails_before_its_commit_leaves_no_booking(api, script, monkeypatch):
    await pause_booking(api, "b1")
    monkeypatch.setenv("AGENT_FAULT_POINT", "before_commit")
    monkeypatch.setenv("AGENT_FAULT_ACTION", "raise")
    failed = await resume(api, "b1", APPROVE, idem="ok")
    assert failed.status_code == 500
    assert await orm(bookings) == []  # book_table ran, its effect was never applied
    monkeypatch.delenv("AGENT_FAULT_POINT")
    # Aborted: its key may be retried, and the retry books once.
    retried = body(await resume(api, "b1", APPROVE, idem="ok"))
    assert retried["status"] == "committed" and len(await orm(bookings)) == 1


async def test_a_fenced_turn_leaves_no_booking(api, script, monkeypatch):
    """The session moved on while the resume ran (here: deleted): the
    commit is stale and its effects go with it."""
    await pause_booking(api, "b1")
    script.gate = threading.Event()  # holds the reply after book_table ran

    running = asyncio.ensure_future(resume(api, "b1", APPROVE))
    await asyncio.to_thread(script.reply_started.wait, 5)
    assert (await api.call("DELETE", "/sessions/b1")).status_code == 204
    script.gate.set()
    stale = await running
    assert stale.status_code == 409 and body(stale)["error"]["code"] == "stale_turn"
    assert await orm(bookings) == []


async def test_concurrent_retries_with_one_key_book_once(api, script, settings):
    settings.AGENT_SESSION_WAIT_SECONDS = 10
    await pause_booking(api, "b1")
    answers = await asyncio.gather(*(resume(api, "b1", APPROVE, idem="same") for _ in range(4)))
    statuses = sorted(r.status_code for r in answers)
    codes = [body(r).get("error", {}).get("code") for r in answers if r.status_code != 200]
    assert 200 in statuses and set(codes) <= {"turn_in_progress"}, (statuses, codes)
    committed = {body(r)["turn_id"] for r in answers if r.status_code == 200}
    assert len(committed) == 1  # the others replayed the one that committed, or were told it runs
    assert len(await orm(bookings)) == 1


async def test_different_requests_resuming_at_once_book_once(api, script, settings):
    """Two resumes racing (no shared key): one commits, the other is
    refused — the session is busy, or the pause is already answered."""
    settings.AGENT_SESSION_WAIT_SECONDS = 10
    await pause_booking(api, "b1")
    first, second = await asyncio.gather(resume(api, "b1", APPROVE), resume(api, "b1", APPROVE))
    outcomes = sorted([first.status_code, second.status_code])
    assert outcomes == [200, 409], (first.content, second.content)
    refused = first if first.status_code == 409 else second
    assert body(refused)["error"]["code"] in {"interrupt_resolved", "session_busy"}
    assert len(await orm(bookings)) == 1


async def test_cancelling_a_running_turn_drops_its_effects(api, script):
    await pause_booking(api, "b1")
    script.gate = threading.Event()
    script.reply_started.clear()
    running = asyncio.ensure_future(resume(api, "b1", APPROVE))
    await asyncio.to_thread(script.reply_started.wait, 5)  # book_table ran, the reply streams
    turn = await orm(lambda: AgentTurn.objects.filter(status="pending").get())
    cancelled = await api.call("POST", f"/sessions/b1/turns/{turn.id}/cancel")
    assert cancelled.status_code == 200, cancelled.content
    assert body(cancelled)["status"] == "aborted" and body(cancelled)["error"]["code"] == "turn_cancelled"
    outcome = await running
    assert outcome.status_code == 409 and body(outcome)["error"]["code"] == "turn_cancelled"
    script.gate.set()
    assert await orm(bookings) == []
    # The pause is still there to answer.
    info = body(await api.call("GET", "/sessions/b1"))
    assert info["interrupts"][0]["value"]["action_requests"][0]["name"] == "book_table"


def test_an_effect_nobody_registered_is_refused():
    context = effects.TurnContext(session_id=None, epoch=1, turn_id=None, idempotency_key=None)
    with effects.running(context), pytest.raises(effects.EffectError, match="no handler"):
        effects.record("nobody.knows", {})
    with pytest.raises(effects.EffectError, match="while agentsite runs a turn"):
        effects.effect_key()


def test_effect_keys_repeat_for_a_retried_request_and_differ_otherwise():
    import uuid

    session = uuid.uuid4()

    def keys(idem, turn_id, n=2):
        context = effects.TurnContext(session_id=session, epoch=1, turn_id=turn_id, idempotency_key=idem)
        with effects.running(context):
            return [effects.effect_key("book_table") for _ in range(n)]

    first, retry = keys("k-1", uuid.uuid4()), keys("k-1", uuid.uuid4())
    assert first == retry  # same request retried: same keys, call by call
    assert first[0] != first[1]  # two calls in one turn: two keys
    assert keys("k-2", uuid.uuid4()) != first
    # Without an Idempotency-Key a retry is a new request with new keys.
    assert keys(None, uuid.uuid4()) != keys(None, uuid.uuid4())


# --- cancel ---------------------------------------------------------------------------------------


async def test_cancel_is_idempotent_and_answers_an_ended_turn_s_state(app, api, alice, api_bob, script):
    from tests.turns_app.test_sse_consumer import post

    script.gate = threading.Event()
    script.reply_started.clear()
    stream = post(app, alice, "s1", "Ada Lovelace")
    await stream.start()
    first = await stream.next_event()
    await asyncio.to_thread(script.reply_started.wait, 5)
    turn_id = json.loads(first.data)["turn_id"]
    path = f"/sessions/s1/turns/{turn_id}/cancel"
    assert (await api_bob.call("POST", path)).status_code == 404  # another owner's
    cancelled = await api.call("POST", path)
    assert (cancelled.status_code, body(cancelled)["status"]) == (200, "aborted")
    # The stream that started it ends with the cancel's error, nothing committed.
    rest = await stream.events()
    assert rest[-1].event == "error" and json.loads(rest[-1].data)["code"] == "turn_cancelled"
    script.gate.set()
    again = await api.call("POST", path)
    assert (again.status_code, body(again)) == (200, body(cancelled))
    session = await orm(lambda: AgentTurn.objects.get(pk=turn_id).session)
    assert session.version == 0 and session.active_turn_id is None
    done = body(await api.chat("s1", "Ada Lovelace"))
    committed = await api.call("POST", f"/sessions/s1/turns/{done['turn_id']}/cancel")
    assert committed.status_code == 409 and body(committed)["error"]["code"] == "turn_committed"


@pytest.fixture(scope="module")
def app():
    from agentsite.routing import build_application

    return build_application()
