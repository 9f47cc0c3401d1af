"""Reads of turns, their event logs and transcripts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models import Count

from agentsite.errors import TurnNotFound
from sessions_app.selectors import session_get
from turns_app.models import AgentTurn, AgentTurnEvent
from turns_app.types import TurnEvent


def turn_list(*, owner: str, key: str) -> list[AgentTurn]:
    """The current epoch's turns, oldest first."""
    session = session_get(owner=owner, key=key)
    return list(AgentTurn.objects.filter(session=session, epoch=session.epoch).order_by("number"))


def transcript(*, owner: str, key: str) -> list[dict[str, Any]]:
    """Committed messages only: the snapshot is written by the commit."""
    session = session_get(owner=owner, key=key)
    return list(session.snapshot.get("messages", []))


def turn_by_id(*, turn_id: UUID) -> AgentTurn:
    turn = AgentTurn.objects.filter(pk=turn_id).first()
    if turn is None:  # deleted with its session since the claim replayed it
        raise TurnNotFound()
    return turn


def turn_of_owner(*, owner: str, key: str, turn_id: UUID) -> AgentTurn:
    """Another owner's session answers the same 404 as a missing one."""
    session = session_get(owner=owner, key=key)
    turn = AgentTurn.objects.filter(pk=turn_id, session=session, epoch=session.epoch).first()
    if turn is None:
        raise TurnNotFound()
    return turn


def turn_counts(*, session_ids: list[UUID]) -> dict[UUID, int]:
    """Turns per session, all epochs (what a delete would remove)."""
    return dict(
        AgentTurn.objects.filter(session__in=session_ids)
        .values_list("session")
        .annotate(n=Count("id"))
    )


@dataclass(frozen=True)
class LoggedEvents:
    """A turn's log past a client's Last-Event-ID."""

    events: list[TurnEvent]  # seq > after, in order
    final: TurnEvent | None  # the event that ended the turn, once it has ended
    running: bool


def turn_events_after(*, turn_id: UUID, after: int) -> LoggedEvents:
    """Events of the turn with seq > `after`. A turn that has ended (or is
    gone with its session) has a final event; read together with the
    turn's status, so "running" and "no final event" always agree."""
    status = AgentTurn.objects.filter(pk=turn_id).values_list("status", flat=True).first()
    rows = AgentTurnEvent.objects.filter(turn_id=turn_id).order_by("seq")
    events = [TurnEvent(r.seq, r.event, r.data) for r in rows.filter(seq__gt=after)]
    if status == AgentTurn.Status.PENDING:
        return LoggedEvents(events, None, True)
    last = events[-1] if events else rows.order_by("-seq").first()
    if isinstance(last, AgentTurnEvent):
        last = TurnEvent(last.seq, last.event, last.data)
    return LoggedEvents(events, last, False)
