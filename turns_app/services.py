"""The database steps of a turn: claim, renew, commit, abort; and purging a
deleted session's turns.

Each step is one short, durable `transaction.atomic()` that locks the session
row first (`sessions_app.services.session_lock`); none is held while the
model runs (DESIGN.md, "The turn protocol"). Durable, so calling one inside
another transaction fails loudly instead of silently moving its commit point.
They are sync and return plain data (turns_app.types); async callers go
through `agentsite.asyncdb.db`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, OuterRef, Subquery
from django.db.models.functions import Now

from agentsite.errors import (
    IdempotencyConflict,
    InvalidIdempotencyKey,
    SessionBusy,
    SessionNotFound,
    StaleTurn,
    TurnInProgress,
)
from sessions_app.selectors import check_session_key, sessions_with_expired_lease
from sessions_app.services import session_lock, session_lock_or_create
from turns_app import faults
from turns_app.checkpoints import delete_threads, retention_apply
from turns_app.models import AgentTurn, AgentTurnEvent
from turns_app.types import Claim, Outcome, Replay, TurnEvent, checkpoint_thread_id
from turns_app.wakeups import wake_followers

if TYPE_CHECKING:
    from sessions_app.models import AgentSession

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY_MAX = 128
COMPACT_BATCH = 1000


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


# --- under the session's lock ---------------------------------------------------------


def _lock_for_turn(turn_id: UUID) -> tuple[AgentTurn, AgentSession] | None:
    """Call inside `transaction.atomic`. Locks the turn's session, then reads
    the turn (the lock order of `session_lock`)."""
    session_id = AgentTurn.objects.filter(pk=turn_id).values_list("session_id", flat=True).first()
    if session_id is None:
        return None
    try:
        session = session_lock(session_id=session_id, include_deleted=True)
    except SessionNotFound:
        return None
    turn = AgentTurn.objects.filter(pk=turn_id).first()
    if turn is None:
        return None
    return turn, session


def _write_events(turn_id: UUID, events: list[TurnEvent]) -> None:
    """Call inside a transaction. An event already written (a batch retried
    after its answer was lost) is skipped, not duplicated."""
    if events:
        AgentTurnEvent.objects.bulk_create(
            [AgentTurnEvent(turn_id=turn_id, seq=e.id, event=e.event, data=e.data) for e in events],
            ignore_conflicts=True,
        )
        wake_followers(turn_id)


def _write_terminal(turn: AgentTurn, event: str, data: str, pending: list[TurnEvent], seq: int | None) -> TurnEvent:
    """Call with the session locked: the run's unwritten events, then the
    final one, at `seq` (reserved by the run) or after everything stored."""
    if seq is None:
        stored = AgentTurnEvent.objects.filter(turn=turn).aggregate(last=Max("seq"))["last"] or 0
        seq = max([stored, *(e.id for e in pending)]) + 1
    terminal = TurnEvent(seq, event, data)
    _write_events(turn.id, [*pending, terminal])
    return terminal


def _abort_locked(
    turn: AgentTurn,
    session: AgentSession,
    code: str,
    message: str,
    *,
    purge: bool = False,
    pending: list[TurnEvent] = (),
    seq: int | None = None,
) -> None:
    """Call with the session locked. A pending turn becomes aborted and its
    `error` event is written (after the run's `pending` events; at `seq`
    when the run reserved one). `purge` drops the turn's checkpoint thread:
    only for a run known to be over (a dead lease's process may still be
    writing; retention catches that one later)."""
    if purge and turn.status != AgentTurn.Status.COMMITTED:
        # Never a committed turn's thread: an abort after a commit whose
        # answer was lost (an outage) must not delete what it committed.
        delete_threads([turn.checkpoint_thread])
    if turn.status == AgentTurn.Status.PENDING:
        turn.status = AgentTurn.Status.ABORTED
        turn.error = {"code": code, "message": message}
        turn.finished_at = session.db_now
        turn.save(update_fields=["status", "error", "finished_at"])
        _write_terminal(turn, "error", json.dumps(turn.error, ensure_ascii=False), list(pending), seq)
    if session.active_turn_id == turn.id:
        session.release()


def _expire_dead_turn(session: AgentSession) -> bool:
    """Call with the session locked. Aborts the turn holding the session if
    its lease ran out; True if there was one."""
    if not session.active_turn_id or session.has_live_turn(session.db_now):
        return False
    dead = AgentTurn.objects.filter(pk=session.active_turn_id).first()
    if dead is not None:
        _abort_locked(dead, session, "lease_expired", "the turn's lease ran out")
    else:
        session.release()
    return True


# --- the steps ---------------------------------------------------------------------------


def turn_claim(
    *, owner: str, key: str, request: dict[str, Any], idempotency_key: str | None
) -> Claim | Replay:
    """Step 1. Resolves the idempotency key, expires a dead active turn, and
    inserts a `pending` turn holding the session's lease. Raises `SessionBusy`
    when a live turn holds the session (the caller decides whether to wait)."""
    check_session_key(key)
    digest = request_digest(request)
    with transaction.atomic(durable=True):
        session = session_lock_or_create(owner=owner, key=key)
        _expire_dead_turn(session)
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
        if session.has_live_turn(session.db_now):
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
        first = TurnEvent(1, "turn", turn_event_data(turn))
        _write_events(turn.id, [first])
        session.hold(turn.id, session.db_now)
    return Claim(
        first_event=first,
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


def turn_event_data(turn: AgentTurn) -> str:
    """The first event of every turn's stream."""
    return json.dumps(
        {"turn_id": str(turn.id), "epoch": turn.epoch, "number": turn.number, "base_version": turn.base_version},
        ensure_ascii=False,
    )


def events_append(*, turn_id: UUID, events: list[TurnEvent]) -> bool:
    """A batch of a running turn's events, written outside the session's
    lock (events order themselves by `seq`). False if the turn is gone
    (deleted with its session): nobody will read them."""
    try:
        with transaction.atomic(durable=True):
            _write_events(turn_id, events)
    except IntegrityError:
        if AgentTurn.objects.filter(pk=turn_id).exists():
            raise
        return False
    return True


def turn_renew_lease(*, turn_id: UUID) -> bool:
    """Extends the lease while the turn still holds the session; False means
    it lost it (fenced off by a delete, a set-fields or an expiry)."""
    with transaction.atomic(durable=True):
        locked = _lock_for_turn(turn_id)
        if locked is None:
            return False
        turn, session = locked
        if turn.status != AgentTurn.Status.PENDING or session.active_turn_id != turn.id:
            return False
        session.hold(turn.id, session.db_now)
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


def turn_commit(
    *,
    turn_id: UUID,
    outcome: Outcome,
    pending: list[TurnEvent] = (),
    done_seq: int | None = None,
) -> str:
    """Step 3. Succeeds only if the session is still at the turn's epoch and
    base version and the turn still holds a live lease; otherwise the turn is
    aborted (`stale_turn`, its `error` event written) and nothing else
    changes. Returns the stored body, which is also the `done` event's data,
    written with the commit at `done_seq` after the run's `pending` events:
    `done` is in the log exactly when the turn is committed.

    Retention runs after the commit (on_commit, robust): housekeeping never
    holds the session's lock, and a failed prune never undoes a good turn."""
    faults.hit("before_commit")
    stale: str | None = None
    with transaction.atomic(durable=True):
        locked = _lock_for_turn(turn_id)
        if locked is None:
            # Deleted along with its session: what the run wrote is nobody's.
            delete_threads([outcome.thread_id] if outcome.thread_id else [])
            stale = "the session was deleted while the turn ran"
        else:
            turn, session = locked
            stale = _commit_locked(turn, session, outcome, list(pending), done_seq)
            if stale is None:

                def prune() -> None:
                    # A named function: Django's robust on_commit logs a
                    # failure by the callable's __qualname__ (partial has none).
                    retention_apply(session_id=session.id, epoch=turn.epoch, number=turn.number)

                transaction.on_commit(prune, robust=True)
    if stale is not None:
        raise StaleTurn(stale)
    faults.hit("after_commit")
    return turn.result


def _commit_locked(
    turn: AgentTurn,
    session: AgentSession,
    outcome: Outcome,
    pending: list[TurnEvent],
    done_seq: int | None,
) -> str | None:
    """Call with the session locked. Returns why the turn is stale (and
    aborts it), or None once it is committed."""
    stale = None
    if turn.status != AgentTurn.Status.PENDING:
        stale = f"the turn is already {turn.status}"
    elif session.is_deleted or session.epoch != turn.epoch:
        stale = "the session was deleted while the turn ran"
    elif session.version != turn.base_version:
        stale = "the session's version moved while the turn ran"
    elif session.active_turn_id != turn.id or not session.has_live_turn(session.db_now):
        stale = "the turn lost its lease on the session"
    if stale is not None:
        _abort_locked(turn, session, "stale_turn", stale, purge=True, pending=pending, seq=done_seq)
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
    turn.finished_at = session.db_now
    turn.result = render_result(turn, session, outcome)
    turn.save(update_fields=["status", "checkpoint_id", "finished_at", "result"])
    _write_terminal(turn, "done", turn.result, pending, done_seq)
    return None


def turn_abort(
    *,
    turn_id: UUID,
    code: str,
    message: str,
    thread_id: str | None = None,
    pending: list[TurnEvent] = (),
    seq: int | None = None,
) -> TurnEvent | None:
    """Marks a pending turn aborted (its `error` event written after the
    run's `pending` ones, at `seq` if the run reserved it), drops its
    checkpoint thread, and frees the session if the turn holds it. Call only
    once the run is over. Returns the turn's final event as stored — this
    one, or the one that ended it before (a stale commit's) — or None when
    the turn is gone: `thread_id` is the run's thread, and when the turn was
    deleted with its session, what the run wrote (a cancelled run still
    saves on exit) is nobody's and is dropped here, as `turn_commit` does."""
    with transaction.atomic(durable=True):
        locked = _lock_for_turn(turn_id)
        if locked is None:
            delete_threads([thread_id] if thread_id else [])
            return None
        turn, session = locked
        _abort_locked(turn, session, code, message, purge=True, pending=list(pending), seq=seq)
        last = AgentTurnEvent.objects.filter(turn=turn).order_by("-seq").first()
        return TurnEvent(last.seq, last.event, last.data) if last is not None else None


def turns_expire_dead() -> int:
    """Abort every turn whose lease ran out (its process died), without
    waiting for the next claim on its session. Safe while serving: each
    session is re-checked under its row lock. Returns how many were aborted."""
    expired = 0
    for session_id in sessions_with_expired_lease():
        with transaction.atomic(durable=True):
            try:
                session = session_lock(session_id=session_id, include_deleted=True)
            except SessionNotFound:
                continue
            expired += _expire_dead_turn(session)
    return expired


def turn_expire_if_dead(*, turn_id: UUID) -> bool:
    """Abort this turn if its lease ran out (a follower's check that the
    process running it is still alive). True if it aborted it."""
    with transaction.atomic(durable=True):
        locked = _lock_for_turn(turn_id)
        if locked is None:
            return False
        turn, session = locked
        if turn.status != AgentTurn.Status.PENDING or session.active_turn_id != turn.id:
            return False
        return _expire_dead_turn(session)


def events_compact(*, older_than_seconds: float | None = None) -> int:
    """Compact the logs of turns that ended more than the retention time ago
    to their first (`turn`) and final (`done`/`error`) events: re-attaching
    still ends in the outcome. Returns how many events it removed."""
    seconds = settings.AGENT_EVENT_RETENTION_SECONDS if older_than_seconds is None else older_than_seconds
    final = AgentTurnEvent.objects.filter(turn=OuterRef("turn")).order_by("-seq").values("seq")[:1]
    doomed = (
        AgentTurnEvent.objects.filter(
            turn__finished_at__lt=Now() - timedelta(seconds=seconds),
            turn__status__in=[AgentTurn.Status.COMMITTED, AgentTurn.Status.ABORTED],
            seq__gt=1,
        )
        .exclude(seq=Subquery(final))
        .values_list("id", flat=True)
    )
    removed = 0
    while ids := list(doomed[:COMPACT_BATCH]):
        with transaction.atomic(durable=True):
            removed += AgentTurnEvent.objects.filter(id__in=ids).delete()[0]
    return removed


def turns_abort_pending(*, reason: str = "the server restarted before the turn committed") -> int:
    """Start-up in single-process (SQLite) mode: nothing else can be running a
    turn, so every `pending` turn is dead. Returns how many were aborted."""
    pending = list(
        AgentTurn.objects.filter(status=AgentTurn.Status.PENDING).values_list("id", flat=True)
    )
    for turn_id in pending:
        turn_abort(turn_id=turn_id, code="server_restarted", message=reason)
    return len(pending)


# --- deleting a session ---------------------------------------------------------------------


def session_turns_purge(*, session: AgentSession, **_: object) -> None:
    """Receiver of `sessions_app.signals.session_deleting`, inside the
    delete's transaction with the session locked: drop every checkpoint
    thread and every turn of the session, so they go with the tombstone or
    not at all. Connected in `TurnsAppConfig.ready`."""
    turns = list(AgentTurn.objects.filter(session=session).values_list("id", "epoch"))
    threads = [checkpoint_thread_id(session.id, epoch, turn_id) for turn_id, epoch in turns]
    if session.checkpoint_thread:
        threads.append(session.checkpoint_thread)
    delete_threads(sorted(set(threads)))
    AgentTurn.objects.filter(session=session).delete()
