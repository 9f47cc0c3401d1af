"""A turn's session, locked, found from the turn: how the steps that know
only a turn id (renew, abort, a commit off its usual path) take the lock."""

from __future__ import annotations

from uuid import UUID

from core.errors import SessionNotFound
from sessions_app.services import LockedSession, session_lock
from turns_app.models import AgentTurn


def lock_for_turn(turn_id: UUID) -> tuple[AgentTurn, LockedSession] | None:
    """Call inside `transaction.atomic`. Locks the turn's session, then reads
    the turn (the lock order of sessions_app.locking). None when the turn or
    its session is gone."""
    session_id = AgentTurn.objects.filter(pk=turn_id).values_list("session_id", flat=True).first()
    if session_id is None:
        return None
    try:
        locked = session_lock(session_id=session_id, include_deleted=True)
    except SessionNotFound:
        return None
    turn = AgentTurn.objects.filter(pk=turn_id).first()
    if turn is None:
        return None
    return turn, locked
