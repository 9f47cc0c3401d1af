"""Ending a turn without a commit: the abort a run's failure (or a stale
commit, an expired lease) ends in, the cancel a client asks for, and the
start-up abort of every turn a dead single process left pending
(docs/turn-protocol.md, "Abort" and "Cancel")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from uuid import UUID

from django.db import transaction

from core.errors import TurnCommitted, TurnNotFound
from sessions_app.selectors import session_get
from sessions_app.services import LockedSession, session_lock
from turns_app.checkpoint_tables import delete_threads
from turns_app.models import FINISHED, AgentTurn, AgentTurnEvent
from turns_app.services.event_rows import write_final_event
from turns_app.services.turn_lock import lock_for_turn
from turns_app.types import TurnEvent
from turns_app.wakeups import wake_runner


def abort_locked(
    locked: LockedSession,
    turn: AgentTurn,
    *,
    code: str,
    message: str,
    pending: Sequence[TurnEvent] = (),
    seq: int | None = None,
) -> bool:
    """A pending turn becomes aborted, its `error` event written (after the
    run's `pending` events; at `seq` when the run reserved one), and the
    checkpoint its run may have persisted is dropped (its own thread only: a
    resume's run starts from a paused turn's thread, which stays for the
    next resume). The session is freed if the turn holds it. True if it was
    pending."""
    aborted = turn.status == AgentTurn.Status.PENDING
    if aborted:
        turn.status = AgentTurn.Status.ABORTED
        turn.error = {"code": code, "message": message}
        turn.finished_at = locked.now
        turn.save(update_fields=["status", "error", "finished_at"])
        write_final_event(locked, turn, "error", json.dumps(turn.error, ensure_ascii=False), list(pending), seq)
        delete_threads([turn.checkpoint_thread])
    if locked.session.active_turn_id == turn.id:
        locked.release()
    return aborted


def turn_abort(
    *,
    turn_id: UUID,
    code: str,
    message: str,
    thread_id: str | None = None,
    pending: Sequence[TurnEvent] = (),
    seq: int | None = None,
) -> TurnEvent | None:
    """Marks a pending turn aborted (its `error` event written after the
    run's `pending` ones, at `seq` if the run reserved it) and frees the
    session if the turn holds it. Call only once the run is over. Returns the
    turn's final event as stored — this one, or the one that ended it before
    (a stale commit's, a cancel's) — or None when the turn is gone with its
    session (then a checkpoint its run persisted, `thread_id`, is dropped)."""
    with transaction.atomic(durable=True):
        found = lock_for_turn(turn_id)
        if found is None:
            delete_threads([thread_id] if thread_id else [])
            return None
        turn, locked = found
        abort_locked(locked, turn, code=code, message=message, pending=list(pending), seq=seq)
        last = AgentTurnEvent.objects.filter(turn=turn).order_by("-seq").first()
        return TurnEvent(last.seq, last.event, last.data) if last is not None else None


def turn_cancel(*, owner: str, key: str, turn_id: UUID) -> AgentTurn:
    """Cancel a turn, whichever process runs it: a pending turn is aborted
    here (`turn_cancelled`, nothing of it committed, its effects dropped) and
    the process running it is told to stop. Cancelling a cancelled or failed
    turn answers its state again; a committed one is `TurnCommitted`."""
    session = session_get(owner=owner, key=key)
    with transaction.atomic(durable=True):
        locked = session_lock(session_id=session.id)
        session = locked.session
        turn = AgentTurn.objects.filter(pk=turn_id, session=session, epoch=session.epoch).first()
        if turn is None:
            raise TurnNotFound()
        if turn.status in FINISHED:
            raise TurnCommitted(details={"turn_id": str(turn.id), "status": turn.status})
        if abort_locked(locked, turn, code="turn_cancelled", message="the turn was cancelled; nothing was committed"):
            wake_runner(turn.id)
    return turn


def turns_abort_pending(*, reason: str = "the server restarted before the turn committed") -> int:
    """Start-up in single-process (SQLite) mode: nothing else can be running a
    turn, so every `pending` turn is dead. Returns how many were aborted."""
    pending = list(AgentTurn.objects.filter(status=AgentTurn.Status.PENDING).values_list("id", flat=True))
    for turn_id in pending:
        turn_abort(turn_id=turn_id, code="server_restarted", message=reason)
    return len(pending)
