"""The turn protocol's database steps: claim, renew, commit, abort.

Each is one short `transaction.atomic()` that locks the session row; none is
held while the model runs (DESIGN.md, "The turn protocol"). They are sync and
return plain data, so async callers wrap them in `sync_to_async`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agentsite.agent.checkpointer import delete_threads
from agentsite.errors import (
    IdempotencyConflict,
    InvalidIdempotencyKey,
    SessionBusy,
    StaleTurn,
    TurnInProgress,
)
from sessions_app.models import AgentSession
from sessions_app.selectors import check_session_key
from sessions_app.services import session_lock_or_create
from turns_app import faults
from turns_app.models import AgentTurn, checkpoint_thread_id
from turns_app.retention import retention_apply

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY_MAX = 128


def check_idempotency_key(raw: str | None) -> str | None:
    if raw is None:
        return None
    # Visible ASCII only: the key is echoed in logs and compared byte for byte.
    if not (1 <= len(raw) <= IDEMPOTENCY_KEY_MAX) or not all(33 <= ord(c) <= 126 for c in raw):
        raise InvalidIdempotencyKey()
    return raw


def request_digest(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def lease_deadline():
    return timezone.now() + timedelta(seconds=settings.AGENT_TURN_LEASE_SECONDS)


@dataclass(frozen=True)
class Replay:
    """A committed turn answered again from its stored body."""

    turn_id: UUID
    body: str


@dataclass(frozen=True)
class Claim:
    """What a run needs, copied out of the locked rows."""

    turn_id: UUID
    session_id: UUID
    epoch: int
    number: int
    base_version: int
    request: dict[str, Any]
    form: list[dict[str, Any]]
    fields: dict[str, Any]
    stage: str
    snapshot: dict[str, Any]
    checkpoint_thread: str | None
    committed_checkpoint_id: str | None

    @property
    def thread_id(self) -> str:
        return checkpoint_thread_id(self.session_id, self.epoch, self.turn_id)


@dataclass(frozen=True)
class Outcome:
    """What a finished run proposes to commit."""

    reply: str
    field_changes: dict[str, Any]
    fields: dict[str, Any]
    stage: str
    snapshot: dict[str, Any]
    checkpoint_id: str | None
    thread_id: str | None = None


def _abort_locked(
    turn: AgentTurn, session: AgentSession, code: str, message: str, *, purge: bool = False
) -> None:
    """Call inside `transaction.atomic` with the session locked. `purge` drops
    the turn's checkpoint thread: only for a run known to be over (a dead
    lease's process may still be writing; retention catches that one later)."""
    if purge and turn.status != AgentTurn.Status.COMMITTED:
        # Never a committed turn's thread: an abort after a commit whose
        # answer was lost (an outage) must not delete what it committed.
        delete_threads([turn.checkpoint_thread])
    if turn.status == AgentTurn.Status.PENDING:
        turn.status = AgentTurn.Status.ABORTED
        turn.error = {"code": code, "message": message}
        turn.finished_at = timezone.now()
        turn.save(update_fields=["status", "error", "finished_at"])
    if session.active_turn_id == turn.id:
        session.active_turn_id = None
        session.lease_expires_at = None
        session.save(update_fields=["active_turn_id", "lease_expires_at", "updated_at"])


def _expire_dead_turn(session: AgentSession, now) -> None:
    """Call inside `transaction.atomic` with the session locked."""
    if session.active_turn_id and not session.has_live_turn(now):
        dead = AgentTurn.objects.filter(pk=session.active_turn_id).first()
        if dead is not None:
            _abort_locked(dead, session, "lease_expired", "the turn's lease ran out")
        else:
            session.active_turn_id = None
            session.lease_expires_at = None
            session.save(update_fields=["active_turn_id", "lease_expires_at", "updated_at"])


def turn_claim(
    *, owner: str, key: str, request: dict[str, Any], idempotency_key: str | None
) -> Claim | Replay:
    """Step 1. Resolves the idempotency key, expires a dead active turn, and
    inserts a `pending` turn holding the session's lease. Raises `SessionBusy`
    when a live turn holds the session (the caller decides whether to wait)."""
    check_session_key(key)
    digest = request_digest(request)
    with transaction.atomic():
        session = session_lock_or_create(owner=owner, key=key)
        now = timezone.now()
        _expire_dead_turn(session, now)
        if idempotency_key is not None:
            previous = (
                AgentTurn.objects.filter(
                    session=session, epoch=session.epoch, idempotency_key=idempotency_key
                )
                .exclude(status=AgentTurn.Status.ABORTED)
                .first()
            )
            if previous is not None:
                if previous.request_digest != digest:
                    raise IdempotencyConflict()
                if previous.status == AgentTurn.Status.COMMITTED:
                    return Replay(turn_id=previous.id, body=previous.result)
                raise TurnInProgress()
        if session.has_live_turn(now):
            raise SessionBusy()
        last = (
            AgentTurn.objects.filter(session=session, epoch=session.epoch)
            .order_by("-number")
            .values_list("number", flat=True)
            .first()
        )
        turn = AgentTurn.objects.create(
            session=session,
            epoch=session.epoch,
            number=(last or 0) + 1,
            base_version=session.version,
            idempotency_key=idempotency_key,
            request_digest=digest,
            request=request,
        )
        session.active_turn_id = turn.id
        session.lease_expires_at = lease_deadline()
        session.save(update_fields=["active_turn_id", "lease_expires_at", "updated_at"])
        return Claim(
            turn_id=turn.id,
            session_id=session.id,
            epoch=session.epoch,
            number=turn.number,
            base_version=session.version,
            request=request,
            form=session.form,
            fields=session.fields,
            stage=session.stage,
            snapshot=session.snapshot,
            checkpoint_thread=session.checkpoint_thread,
            committed_checkpoint_id=session.committed_checkpoint_id,
        )


def _lock_for_turn(turn_id: UUID) -> tuple[AgentTurn, AgentSession] | None:
    """Call inside `transaction.atomic`. Locks the turn's session, then reads
    the turn (session first, always, so no two paths lock in opposite order)."""
    session_id = AgentTurn.objects.filter(pk=turn_id).values_list("session_id", flat=True).first()
    if session_id is None:
        return None
    session = AgentSession.objects.select_for_update().filter(pk=session_id).first()
    turn = AgentTurn.objects.filter(pk=turn_id).first()
    if session is None or turn is None:
        return None
    return turn, session


def turn_renew_lease(*, turn_id: UUID) -> bool:
    """Extends the lease while the turn still holds the session; False means
    it lost it (fenced off by a delete, a set-fields or an expiry)."""
    with transaction.atomic():
        locked = _lock_for_turn(turn_id)
        if locked is None:
            return False
        turn, session = locked
        if turn.status != AgentTurn.Status.PENDING or session.active_turn_id != turn.id:
            return False
        session.lease_expires_at = lease_deadline()
        session.save(update_fields=["lease_expires_at"])
        return True


def render_result(turn: AgentTurn, session: AgentSession, outcome: Outcome) -> str:
    body = {
        "turn_id": str(turn.id),
        "epoch": session.epoch,
        "version": session.version,
        "reply": outcome.reply,
        "field_changes": outcome.field_changes,
        "fields": session.fields,
        "stage": session.stage,
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def turn_commit(*, turn_id: UUID, outcome: Outcome) -> str:
    """Step 3. Succeeds only if the session is still at the turn's epoch and
    base version and the turn still holds a live lease; otherwise the turn is
    aborted (`stale_turn`) and nothing else changes. Returns the stored body."""
    faults.hit("before_commit")
    stale: str | None = None
    with transaction.atomic():
        locked = _lock_for_turn(turn_id)
        if locked is None:
            # Deleted along with its session: what the run wrote is nobody's.
            delete_threads([outcome.thread_id] if outcome.thread_id else [])
            stale = "the session was deleted while the turn ran"
        else:
            turn, session = locked
            stale = _commit_locked(turn, session, outcome)
    if stale is not None:
        raise StaleTurn(stale)
    faults.hit("after_commit")
    return turn.result


def _commit_locked(turn: AgentTurn, session: AgentSession, outcome: Outcome) -> str | None:
    """Call inside `transaction.atomic` with the session locked. Returns why
    the turn is stale (and aborts it), or None once it is committed."""
    now = timezone.now()
    stale = None
    if turn.status != AgentTurn.Status.PENDING:
        stale = f"the turn is already {turn.status}"
    elif session.deleted_at is not None or session.epoch != turn.epoch:
        stale = "the session was deleted while the turn ran"
    elif session.version != turn.base_version:
        stale = "the session's version moved while the turn ran"
    elif session.active_turn_id != turn.id or not session.has_live_turn(now):
        stale = "the turn lost its lease on the session"
    if stale is not None:
        _abort_locked(turn, session, "stale_turn", stale, purge=True)
        return stale
    session.fields = outcome.fields
    session.stage = outcome.stage
    session.snapshot = outcome.snapshot
    session.checkpoint_thread = turn.checkpoint_thread
    session.committed_checkpoint_id = outcome.checkpoint_id
    session.version += 1
    session.turn_count += 1
    session.active_turn_id = None
    session.lease_expires_at = None
    session.save()
    turn.status = AgentTurn.Status.COMMITTED
    turn.checkpoint_id = outcome.checkpoint_id
    turn.finished_at = now
    turn.result = render_result(turn, session, outcome)
    turn.save(update_fields=["status", "checkpoint_id", "finished_at", "result"])
    retention_apply(session=session, turn=turn)
    return None


def turn_abort(*, turn_id: UUID, code: str, message: str, thread_id: str | None = None) -> None:
    """Marks a pending turn aborted, drops its checkpoint thread, and frees
    the session if the turn holds it. Call only once the run is over.
    `thread_id` is the run's thread: when the turn was deleted with its
    session, what the run wrote (a cancelled run still saves on exit) is
    nobody's and is dropped here, as `turn_commit` does."""
    with transaction.atomic():
        locked = _lock_for_turn(turn_id)
        if locked is None:
            delete_threads([thread_id] if thread_id else [])
            return
        turn, session = locked
        _abort_locked(turn, session, code, message, purge=True)


def turns_expire_dead() -> int:
    """Abort every turn whose lease ran out (its process died), without
    waiting for the next claim on its session. Safe while serving: each
    session is re-checked under its row lock. Returns how many were aborted."""
    now = timezone.now()
    candidates = list(
        AgentSession.objects.filter(active_turn_id__isnull=False, lease_expires_at__lt=now)
        .values_list("id", flat=True)
    )
    expired = 0
    for session_id in candidates:
        with transaction.atomic():
            session = AgentSession.objects.select_for_update().filter(pk=session_id).first()
            now = timezone.now()
            if session is not None and session.active_turn_id and not session.has_live_turn(now):
                _expire_dead_turn(session, now)
                expired += 1
    return expired


def turns_abort_pending(*, reason: str = "the server restarted before the turn committed") -> int:
    """Start-up in single-process (SQLite) mode: nothing else can be running a
    turn, so every `pending` turn is dead. Returns how many were aborted."""
    aborted = 0
    pending = list(
        AgentTurn.objects.filter(status=AgentTurn.Status.PENDING).values_list("id", flat=True)
    )
    for turn_id in pending:
        turn_abort(turn_id=turn_id, code="server_restarted", message=reason)
        aborted += 1
    return aborted

