"""A turn's lease on its session: renewed while the turn runs, and a turn
whose lease ran out (its process died or stalled) aborted with
`lease_expired` by whoever notices first — the next claim, a follower, the
periodic maintenance (docs/turn-protocol.md, "Leases")."""

from __future__ import annotations

from uuid import UUID

from django.db import transaction

from core.errors import ErrorCode, SessionNotFound
from sessions_app.selectors import sessions_with_expired_lease
from sessions_app.services import LockedSession, session_lock
from turns_app.models import AgentTurn
from turns_app.services.abort import abort_locked
from turns_app.services.turn_lock import lock_for_turn


def expire_dead_turn(locked: LockedSession) -> bool:
    """Aborts the turn holding the session if its lease ran out; True if
    there was one."""
    session = locked.session
    if not session.active_turn_id or session.has_live_turn(locked.now):
        return False
    dead = AgentTurn.objects.filter(pk=session.active_turn_id).first()
    if dead is not None:
        abort_locked(locked, dead, code=str(ErrorCode.LEASE_EXPIRED), message="the turn's lease ran out")
    else:
        locked.release()
    return True


def _holds(turn: AgentTurn, locked: LockedSession) -> bool:
    return turn.status == AgentTurn.Status.PENDING and locked.session.active_turn_id == turn.id


def _locked_if_holding(turn_id: UUID) -> LockedSession | None:
    """The turn's session, locked, if the turn still holds it; else None."""
    found = lock_for_turn(turn_id)
    if found is None:
        return None
    turn, locked = found
    return locked if _holds(turn, locked) else None


def turn_renew_lease(*, turn_id: UUID) -> bool:
    """Extends the lease while the turn still holds the session; False means
    it lost it (fenced off by a delete, a set-fields, a cancel or an expiry)."""
    with transaction.atomic(durable=True):
        locked = _locked_if_holding(turn_id)
        if locked is None:
            return False
        locked.hold(turn_id)
        return True


def turns_expire_dead() -> int:
    """Abort every turn whose lease ran out (its process died), without
    waiting for the next claim on its session. Safe while serving: each
    session is re-checked under its row lock. Returns how many were aborted."""
    expired = 0
    for session_id in sessions_with_expired_lease():
        with transaction.atomic(durable=True):
            try:
                locked = session_lock(session_id=session_id, include_deleted=True)
            except SessionNotFound:
                continue
            expired += expire_dead_turn(locked)
    return expired


def turn_expire_if_dead(*, turn_id: UUID) -> bool:
    """Abort this turn if its lease ran out (a follower's check that the
    process running it is still alive). True if it aborted it."""
    with transaction.atomic(durable=True):
        locked = _locked_if_holding(turn_id)
        return locked is not None and expire_dead_turn(locked)
