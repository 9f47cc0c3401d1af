"""The booking graph's tools. `check_availability` only reads; `book_table`
records a `booking.create` effect — the row is written by the turn's commit —
and, when AGENT_BOOKING_SERVICE_URL names an outside reservation service,
calls it with an `Idempotency-Key` that a retry of the same request repeats
(graphs.runtime.effects.effect_key).

Seats are counted three times, each for its own reason: when the model
asks (`check_availability`), when the approved booking runs (`book_table`:
the reviewer may have edited the party, other bookings may have landed
since), and in the commit under the slot's lock (`create_booking`), the one
count no concurrent commit can slip past."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import httpx
from django.conf import settings
from django.db.models import Sum
from langchain_core.tools import tool

from core.asyncdb import db
from graphs.booking.models import Booking, Slot
from graphs.runtime import effects

EFFECT = "booking.create"
SEATS_PER_SLOT = 20
MAX_PARTY = 12
SERVICE_TIMEOUT_SECONDS = 10.0


class BookingArgsError(ValueError):
    pass


def clean_args(name: Any, date: Any, time: Any, party_size: Any) -> dict[str, Any]:
    """Arguments a model proposed (or a human edited), checked."""
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise BookingArgsError("name must be 1-200 characters")
    try:
        day = dt.date.fromisoformat(str(date))
        at = dt.time.fromisoformat(str(time))
    except ValueError:
        raise BookingArgsError("date must read YYYY-MM-DD and time HH:MM") from None
    if isinstance(party_size, bool) or not isinstance(party_size, int) or not 1 <= party_size <= MAX_PARTY:
        raise BookingArgsError(f"party_size must be a whole number from 1 to {MAX_PARTY}")
    return {"name": name.strip(), "date": day.isoformat(), "time": at.strftime("%H:%M"), "party_size": party_size}


def _seats_taken(date: str, time: str) -> int:
    return Booking.objects.filter(date=date, time=time).aggregate(n=Sum("party_size"))["n"] or 0


@tool
async def check_availability(date: str, time: str, party_size: int) -> str:
    """Whether a table for `party_size` people is free on `date` (YYYY-MM-DD) at `time` (HH:MM)."""
    try:
        args = clean_args("-", date, time, party_size)
    except BookingArgsError as exc:
        return json.dumps({"available": False, "reason": str(exc)})
    free = SEATS_PER_SLOT - await db(_seats_taken, date=args["date"], time=args["time"])
    return json.dumps({"available": free >= args["party_size"], "free_seats": max(free, 0), **args})


@tool
async def book_table(name: str, date: str, time: str, party_size: int) -> str:
    """Book a table for `party_size` people under `name` on `date` (YYYY-MM-DD) at `time` (HH:MM)."""
    try:
        args = clean_args(name, date, time, party_size)
    except BookingArgsError as exc:
        return json.dumps({"booked": False, "reason": str(exc)})
    free = SEATS_PER_SLOT - await db(_seats_taken, date=args["date"], time=args["time"])
    if free < args["party_size"]:
        return json.dumps({"booked": False, "reason": _no_room(args, free), "free_seats": max(free, 0)})
    key = effects.effect_key("book_table")
    reference = f"BK-{key[:10].upper()}"
    confirmation = await _reserve_outside(args, key) if settings.AGENT_BOOKING_SERVICE_URL else ""
    effects.record(EFFECT, {**args, "reference": reference, "confirmation": confirmation})
    return json.dumps({"booked": True, "reference": reference, **args})


async def _reserve_outside(args: dict[str, Any], key: str) -> str:
    """The outside reservation service: it sees the same key on a retry of
    the same request and must perform the reservation once."""
    async with httpx.AsyncClient(timeout=SERVICE_TIMEOUT_SECONDS) as client:
        response = await client.post(settings.AGENT_BOOKING_SERVICE_URL, json=args, headers={"Idempotency-Key": key})
        response.raise_for_status()
        return str(response.json().get("confirmation", ""))[:200]


def _no_room(args: dict[str, Any], free: int) -> str:
    return (
        f"the {args['date']} {args['time']} slot has {max(free, 0)} free seats "
        f"of {SEATS_PER_SLOT}; the booking needs {args['party_size']}"
    )


def create_booking(payload: dict[str, Any], turn: effects.TurnContext) -> dict[str, Any]:
    """The `booking.create` effect, inside the turn's commit transaction,
    under the slot's lock: a booking that no longer fits (another session's
    commit took the seats since `book_table` counted) is refused, and with
    it the whole turn (`EffectRefused`, 409 `effect_refused`)."""
    slot = {"date": payload["date"], "time": payload["time"]}
    # The row to lock: made by the first booking into the slot. A concurrent
    # first insert waits for the other's commit, then finds its row.
    Slot.objects.bulk_create([Slot(**slot)], ignore_conflicts=True)
    Slot.objects.select_for_update().get(**slot)  # on SQLite the IMMEDIATE transaction is the lock
    free = SEATS_PER_SLOT - _seats_taken(**slot)
    if free < payload["party_size"]:
        raise effects.EffectRefused(
            f"not booked: {_no_room(payload, free)} (another booking took them since); "
            "nothing of the turn was committed and the booking still waits for an answer: "
            "edit it to fewer people, or reject it",
            details={"kind": EFFECT, "free_seats": max(free, 0), **payload},
        )
    booking = Booking.objects.create(session_id=turn.session_id, turn_id=turn.turn_id, **payload)
    return {"booking_id": str(booking.id), "reference": booking.reference}
