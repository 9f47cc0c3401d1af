"""A slot's seats hold however bookings race (docs/graphs.md, "The booking
graph"): the approved booking is counted again when it runs, and the
commit counts once more under the slot's lock, refusing what no longer
fits (409 `effect_refused`, nothing of the turn committed, the pause still
waiting)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import uuid

import pytest
from django.db import transaction
from django.db.models import Sum

from graphs.booking.models import Booking
from graphs.booking.tools import SEATS_PER_SLOT, create_booking
from graphs.runtime import effects
from tests.fixtures.runners import orm
from turns_app.models import AgentTurn

pytestmark = pytest.mark.django_db(transaction=True)

SLOT = {"date": "2031-05-01", "time": "19:30"}
WAIT_SECONDS = 60


def body(response) -> dict:
    return json.loads(response.content)


def seats() -> int:
    return Booking.objects.filter(**SLOT).aggregate(n=Sum("party_size"))["n"] or 0


def booked(party: int, name: str = "Walk In") -> None:
    Booking.objects.create(
        reference=f"BK-{uuid.uuid4().hex[:10].upper()}",
        name=name,
        party_size=party,
        session_id=uuid.uuid4(),
        turn_id=uuid.uuid4(),
        **SLOT,
    )


async def pause(api, key: str, party: int) -> dict:
    assert (await api.call("POST", "/sessions", {"key": key, "graph": "booking"})).status_code == 201
    text = f"Book a table for {party} people on {SLOT['date']} at {SLOT['time']}, my name is Ada Lovelace"
    paused = body(await api.chat(key, text))
    assert paused["status"] == "interrupted", paused
    return paused


async def resume(api, key: str, decision: dict):
    return await api.call("POST", f"/sessions/{key}/turns", {"resume": {"decisions": [decision]}})


def edit(party: int) -> dict:
    args = {"name": "Ada Lovelace", **SLOT, "party_size": party}
    return {"type": "edit", "edited_action": {"name": "book_table", "args": args}}


async def test_two_sessions_approving_at_once_never_overbook_the_slot(api, script, settings):
    """Both approved bookings count their seats before either commits (the
    replies are held until both tools ran); the commits take turns on the
    slot's lock, and the second one no longer fits."""
    settings.AGENT_SESSION_WAIT_SECONDS = 30
    await pause(api, "b1", 12)
    await pause(api, "b2", 12)
    script.gate = threading.Event()
    racing = [asyncio.ensure_future(resume(api, key, {"type": "approve"})) for key in ("b1", "b2")]
    for _ in racing:  # both book_table calls ran and recorded their booking
        assert await asyncio.to_thread(script.held.acquire, timeout=WAIT_SECONDS)
    script.gate.set()
    answers = await asyncio.gather(*racing)
    assert sorted(a.status_code for a in answers) == [200, 409], [a.content for a in answers]
    (refused,) = [a for a in answers if a.status_code == 409]
    error = body(refused)["error"]
    assert error["code"] == "effect_refused" and "8 free seats" in error["message"], error
    assert await orm(seats) == 12
    # Nothing of the refused turn landed: its pause still waits, to be edited or rejected.
    key = "b2" if answers[1] is refused else "b1"
    info = body(await api.call("GET", f"/sessions/{key}"))
    assert info["version"] == 1 and info["interrupts"][0]["value"]["action_requests"][0]["args"]["party_size"] == 12
    aborted = await orm(lambda: AgentTurn.objects.get(session__key=key, number=2))
    assert aborted.status == "aborted" and aborted.effects is None
    done = body(await resume(api, key, edit(8)))
    assert done["status"] == "committed" and done["effects"][0]["kind"] == "booking.create", done
    assert await orm(seats) == SEATS_PER_SLOT


async def test_an_edit_to_a_larger_party_is_refused_if_it_no_longer_fits(api, script):
    await orm(booked, party=10)
    paused = await pause(api, "b1", 2)  # 10 seats free: proposed, and asked about
    assert paused["interrupts"][0]["value"]["action_requests"][0]["args"]["party_size"] == 2
    done = body(await resume(api, "b1", edit(12)))
    assert done["status"] == "committed" and done["effects"] == [], done
    assert "not booked" in done["reply"] and "10 free seats" in done["reply"], done["reply"]
    assert await orm(seats) == 10


async def test_an_edit_racing_another_booking_is_refused_in_the_commit(api, script, settings):
    """The edit fitted when its tool ran; a booking committed before it did
    not leave room: the commit refuses it."""
    settings.AGENT_SESSION_WAIT_SECONDS = 30
    await pause(api, "b1", 2)
    script.gate = threading.Event()
    running = asyncio.ensure_future(resume(api, "b1", edit(12)))
    assert await asyncio.to_thread(script.held.acquire, timeout=WAIT_SECONDS)
    await orm(booked, party=10)  # another booking lands while the edited one's reply streams
    script.gate.set()
    refused = await running
    assert refused.status_code == 409 and body(refused)["error"]["code"] == "effect_refused", refused.content
    assert await orm(seats) == 10


def test_the_commit_refuses_a_booking_past_the_slot_s_seats():
    booked(SEATS_PER_SLOT - 3)
    turn = effects.TurnContext(session_id=uuid.uuid4(), epoch=1, turn_id=uuid.uuid4(), idempotency_key=None)
    payload = {"name": "Ada", **SLOT, "party_size": 4, "reference": "BK-X", "confirmation": ""}
    with pytest.raises(effects.EffectRefused, match="3 free seats"), transaction.atomic():
        create_booking(payload, turn)
    assert seats() == SEATS_PER_SLOT - 3
    with transaction.atomic():
        create_booking({**payload, "party_size": 3}, turn)
    assert seats() == SEATS_PER_SLOT
    assert Booking.objects.get(reference="BK-X").date == dt.date(2031, 5, 1)
