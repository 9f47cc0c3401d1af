from __future__ import annotations

import uuid

from django.db import models


class Booking(models.Model):
    """A table booked by the booking graph: written only by the commit of the
    turn whose `book_table` call recorded it, so exactly once per committed
    call, and never for an aborted, cancelled or replayed turn."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    reference = models.CharField(max_length=32, unique=True)
    name = models.CharField(max_length=200)
    date = models.DateField()
    time = models.TimeField()
    party_size = models.PositiveSmallIntegerField()
    # Where it came from: plain ids (a tombstoned session keeps its bookings).
    session_id = models.UUIDField()
    turn_id = models.UUIDField()
    # The outside reservation service's confirmation, when one is configured.
    confirmation = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "booking_bookings"
        ordering = ["date", "time"]

    def __str__(self) -> str:
        return f"{self.reference}: {self.name}, {self.party_size} on {self.date} at {self.time:%H:%M}"


class Slot(models.Model):
    """A date and time tables can be booked at: the row a booking's commit
    locks (select_for_update) while it counts the seats already taken, so
    two commits into one slot take turns and never book past its seats
    (graphs.booking.tools.create_booking). Created by the first booking
    into it."""

    date = models.DateField()
    time = models.TimeField()

    class Meta:
        db_table = "booking_slots"
        constraints = [models.UniqueConstraint(fields=["date", "time"], name="booking_slot_unique")]

    def __str__(self) -> str:
        return f"{self.date} {self.time:%H:%M}"
