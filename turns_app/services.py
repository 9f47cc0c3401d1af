"""The database steps of a turn — claim, renew, commit, abort, cancel — and
what changes a session's history: rewind, fork, the purge of a deleted
session's turns.

Each step is one short, durable `transaction.atomic()` that locks the session
row first (`sessions_app.services.session_lock`); none is held while the
model runs (DESIGN.md, "The turn protocol"). Durable, so calling one inside
another transaction fails loudly instead of silently moving its commit point.
They are sync and return plain data (turns_app.types); async callers go
through `core.asyncdb.db`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max, OuterRef, Subquery
from django.db.models.functions import Now

from core import rows
from graphs.runtime import effects
from core.errors import (
    ErrorCode,
    GraphMismatch,
    IdempotencyConflict,
    InterruptPending,
    InterruptResolved,
    InvalidIdempotencyKey,
    SessionBusy,
    SessionNotFound,
    StaleTurn,
    TurnCommitted,
    TurnInProgress,
    TurnNotFound,
    VersionConflict,
)
from sessions_app.selectors import check_session_key, session_get, sessions_with_expired_lease
from sessions_app.services import (
    insert_under_quota,
    inserted,
    new_session,
    revive_if_deleted,
    session_as_claimed,
    session_create_locked,
    session_insert,
    session_lock,
)
from turns_app import faults, known_sessions
from turns_app.checkpoint_tables import delete_threads
from turns_app.history import chain_ids
from turns_app.models import AgentTurn, AgentTurnEvent
from turns_app.types import Claim, Outcome, Replay, StartFrom, TurnEvent, checkpoint_thread_id
from turns_app.wakeups import wake_followers, wake_runner

if TYPE_CHECKING:
    from sessions_app.models import AgentSession

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY_MAX = 128
COMPACT_BATCH = 1000
FINISHED = (AgentTurn.Status.COMMITTED, AgentTurn.Status.INTERRUPTED)


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


def _event_rows(turn_id: UUID, events: list[TurnEvent]) -> list[AgentTurnEvent]:
    return [AgentTurnEvent(turn_id=turn_id, seq=e.id, event=e.event, data=e.data) for e in events]


def _events_statements(turn_id: UUID, events: list[TurnEvent]) -> list[rows.Statement]:
    """Call inside a transaction. An event already written (a batch retried
    after its answer was lost) is skipped, not duplicated. Followers are
    woken when the transaction commits."""
    if not events:
        return []
    wake_followers(turn_id)
    return rows.insert_statements(_event_rows(turn_id, events), ignore_conflicts=True)


def _write_events(turn_id: UUID, events: list[TurnEvent]) -> None:
    rows.execute(_events_statements(turn_id, events))


def _terminal(turn: AgentTurn, event: str, data: str, pending: list[TurnEvent], seq: int | None) -> TurnEvent:
    """Call with the session locked: the final event, at `seq` (reserved by
    the run) or after everything stored and the run's unwritten `pending`.
    Write it after the turn's row was updated, in the same transaction: a
    follower registering meanwhile waits on that row (wakeups.follow)."""
    if seq is None:
        stored = AgentTurnEvent.objects.filter(turn=turn).aggregate(last=Max("seq"))["last"] or 0
        seq = max([stored, *(e.id for e in pending)]) + 1
    return TurnEvent(seq, event, data)


def _write_terminal(turn: AgentTurn, event: str, data: str, pending: list[TurnEvent], seq: int | None) -> TurnEvent:
    """Call with the session locked: the run's unwritten events, then the final one."""
    terminal = _terminal(turn, event, data, pending, seq)
    _write_events(turn.id, [*pending, terminal])
    return terminal


def _abort_locked(
    turn: AgentTurn,
    session: AgentSession,
    code: str,
    message: str,
    *,
    pending: list[TurnEvent] = (),
    seq: int | None = None,
) -> bool:
    """Call with the session locked. A pending turn becomes aborted, its
    `error` event written (after the run's `pending` events; at `seq` when
    the run reserved one), and the checkpoint its run may have persisted is
    dropped (its own thread only: a resume's run starts from a paused turn's
    thread, which stays for the next resume). True if it was pending."""
    aborted = turn.status == AgentTurn.Status.PENDING
    if aborted:
        turn.status = AgentTurn.Status.ABORTED
        turn.error = {"code": code, "message": message}
        turn.finished_at = session.db_now
        turn.save(update_fields=["status", "error", "finished_at"])
        _write_terminal(turn, "error", json.dumps(turn.error, ensure_ascii=False), list(pending), seq)
        delete_threads([turn.checkpoint_thread])
    if session.active_turn_id == turn.id:
        session.release()
    return aborted


def _expire_dead_turn(session: AgentSession) -> bool:
    """Call with the session locked. Aborts the turn holding the session if
    its lease ran out; True if there was one."""
    if not session.active_turn_id or session.has_live_turn(session.db_now):
        return False
    dead = AgentTurn.objects.filter(pk=session.active_turn_id).first()
    if dead is not None:
        _abort_locked(dead, session, str(ErrorCode.LEASE_EXPIRED), "the turn's lease ran out")
    else:
        session.release()
    return True


def turn_event_data(turn: AgentTurn) -> str:
    """The first event of every turn's stream."""
    return json.dumps(
        {"turn_id": str(turn.id), "epoch": turn.epoch, "number": turn.number, "base_version": turn.base_version},
        ensure_ascii=False,
    )


# --- the steps ---------------------------------------------------------------------------


def turn_claim(
    *,
    owner: str,
    key: str,
    request: dict[str, Any],
    idempotency_key: str | None,
    graph: str | None = None,
    start_from: StartFrom | None = None,
) -> Claim | Replay:
    """Step 1. Resolves the idempotency key, expires a dead active turn, and
    inserts a `pending` turn holding the session's lease. Raises `SessionBusy`
    when a live turn holds the session (the caller decides whether to wait),
    `InterruptPending` for a message while the graph waits for a resume and
    `InterruptResolved` for a resume with nothing to resume.

    `graph`: the graph the caller means to run; a session whose epoch has no
    finished turn yet switches to it, any other refuses (`GraphMismatch`).
    `start_from`: the committed state the turn starts from, when it is not
    the session's current one — the session is rewound to it in this same
    transaction (as `session_rewind` would), so no other write can come
    between the rewind and the turn (edit / regenerate)."""
    check_session_key(key)
    digest = request_digest(request)
    resume = "resume" in request
    if not resume and start_from is None and not known_sessions.seen(owner, key):
        claimed = _claim_new_session(
            owner=owner, key=key, request=request, digest=digest, idempotency_key=idempotency_key, graph=graph
        )
        if claimed is not None:
            known_sessions.remember(owner, key)
            return claimed
    with transaction.atomic(durable=True):
        try:
            session = session_lock(owner=owner, key=key, include_deleted=True)
        except SessionNotFound:
            if resume:
                raise InterruptResolved() from None  # a session that does not exist waits for nothing
            session = session_create_locked(owner=owner, key=key)
        if not session.created_here:
            revive_if_deleted(session)
            _expire_dead_turn(session)
            if idempotency_key is not None:
                previous = (
                    AgentTurn.objects.filter(session=session, epoch=session.epoch, idempotency_key=idempotency_key)
                    .exclude(status=AgentTurn.Status.ABORTED)
                    .first()
                )
                if previous is not None:
                    if previous.request_digest != digest:
                        raise IdempotencyConflict()
                    if previous.status in FINISHED:
                        return Replay(turn_id=previous.id, body=previous.result)
                    raise TurnInProgress()
            if session.has_live_turn(session.db_now):
                raise SessionBusy(holder=session.active_turn_id)
        if graph is not None and graph != session.graph:
            _switch_graph(session, graph)
        head_values, last_number = (None, None) if session.created_here else claim_reads(session)
        if start_from is not None and (start_from.turn_id, start_from.version) != (
            session.head_turn_id,
            session.version,
        ):
            target = _history_turn(session, start_from.turn_id)
            _rewind_locked(session, target)
            head_values = target.values if target is not None else None
        if resume and session.interrupt is None:
            raise InterruptResolved()
        if not resume and session.interrupt is not None:
            raise InterruptPending(details={"interrupts": session.interrupt["interrupts"]})
        turn, first = _new_turn(
            session, number=(last_number or 0) + 1, request=request, digest=digest, idempotency_key=idempotency_key
        )
        session.lease_to(turn.id, session.db_now)
        # The claim's commit is not waited for on disk: a database crash
        # that loses it loses a pending turn whose commit cannot happen
        # without it, and the turn's own commit flushes it (DESIGN.md).
        rows.execute(
            [
                *rows.flushed_by_next_commit(),
                *rows.insert_statements([turn]),
                *_events_statements(turn.id, [first]),
                rows.update_statement(session, session.LEASE_FIELDS),
            ]
        )
    known_sessions.remember(owner, key)
    return _claim_of(session, turn, first, head_values=head_values or {})


def _new_turn(
    session: AgentSession, *, number: int, request: dict[str, Any], digest: str, idempotency_key: str | None
) -> tuple[AgentTurn, TurnEvent]:
    """A pending turn of the session's epoch, from its head, and its first event."""
    turn = AgentTurn(
        session=session,
        epoch=session.epoch,
        number=number,
        base_version=session.version,
        parent_id=session.head_turn_id,
        graph=session.graph,
        idempotency_key=idempotency_key,
        request_digest=digest,
        request=request,
    )
    return turn, TurnEvent(1, "turn", turn_event_data(turn))


def _claim_of(
    session: AgentSession, turn: AgentTurn, first: TurnEvent, *, head_values: dict[str, Any]
) -> Claim:
    return Claim(
        first_event=first,
        turn_id=turn.id,
        session_id=session.id,
        epoch=session.epoch,
        number=turn.number,
        base_version=session.version,
        request=turn.request,
        idempotency_key=turn.idempotency_key,
        graph=session.graph,
        form=session.form,
        fields=session.fields,
        stage=session.stage,
        parent_id=session.head_turn_id,
        head_values=head_values,
        interrupt=session.interrupt if "resume" in turn.request else None,
    )


def _claim_new_session(
    *, owner: str, key: str, request: dict[str, Any], digest: str, idempotency_key: str | None, graph: str | None
) -> Claim | None:
    """A first turn on a key with no session: creates the session holding
    that turn — the session with its lease, the turn and its `turn` event —
    as one transaction of its own, in one round trip on PostgreSQL (issue
    12: BEGIN, a lookup, the writes and COMMIT were four). None when the
    session was not created (the key exists, a concurrent request created
    it first, or the owner is at the quota): then nothing was written, since
    the turn and its event are inserted only where the session row is, and
    the caller claims the usual way."""
    session = new_session(owner=owner, key=key, graph=graph)
    turn, first = _new_turn(session, number=1, request=request, digest=digest, idempotency_key=idempotency_key)
    session_exists = (
        'EXISTS (SELECT 1 FROM "agent_sessions" WHERE "id" = %s)',
        [AgentTurn._meta.pk.get_db_prep_value(session.id, connection)],
    )
    (event,) = _event_rows(turn.id, [first])
    returned = rows.first_row_in_own_transaction(
        [
            insert_under_quota(session, holder=turn.id),
            rows.insert_if_statement(turn, *session_exists),
            rows.insert_if_statement(event, *session_exists),
            *rows.flushed_by_next_commit(),
        ]
    )
    if not inserted(session, returned):
        return None
    wake_followers(turn.id)
    return _claim_of(session, turn, first, head_values={})


def claim_reads(session: AgentSession) -> tuple[dict[str, Any] | None, int | None]:
    """Call with the session locked: the head turn's carried channel values
    and the epoch's last turn number, in one statement. After the lock, not
    beside it (see `session_lock`)."""
    uuid_field = AgentTurn._meta.pk
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT (SELECT "values" FROM "agent_turns" WHERE "id" = %s), '
            '(SELECT MAX("number") FROM "agent_turns" WHERE "session_id" = %s AND "epoch" = %s)',
            [
                uuid_field.get_db_prep_value(session.head_turn_id, connection),
                uuid_field.get_db_prep_value(session.id, connection),
                session.epoch,
            ],
        )
        values, last_number = cursor.fetchone()
    if isinstance(values, (str, bytes)):
        values = json.loads(values)
    return values, last_number


def _switch_graph(session: AgentSession, graph: str) -> None:
    """Call with the session locked. A session runs one graph per epoch:
    only one whose epoch has no finished turn yet may take another."""
    if AgentTurn.objects.filter(session=session, epoch=session.epoch, status__in=FINISHED).exists():
        raise GraphMismatch(f"this session runs the graph {session.graph!r}, not {graph!r}")
    session.graph = graph
    session.save(update_fields=["graph", "updated_at"])


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
    it lost it (fenced off by a delete, a set-fields, a cancel or an expiry)."""
    with transaction.atomic(durable=True):
        locked = _lock_for_turn(turn_id)
        if locked is None:
            return False
        turn, session = locked
        if turn.status != AgentTurn.Status.PENDING or session.active_turn_id != turn.id:
            return False
        session.hold(turn.id, session.db_now)
        return True


def render_result(turn: AgentTurn, session: AgentSession, outcome: Outcome, applied: list[dict[str, Any]]) -> str:
    body = {
        "turn_id": str(turn.id),
        "epoch": session.epoch,
        "version": session.version,
        "status": turn.status,
        "reply": outcome.reply,
        "field_changes": outcome.field_changes,
        "fields": session.fields,
        "stage": session.stage,
        "interrupts": outcome.interrupts,
        "effects": applied,
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def turn_commit(
    *,
    turn_id: UUID,
    outcome: Outcome,
    pending: list[TurnEvent] = (),
    done_seq: int | None = None,
    claim: Claim | None = None,
) -> str:
    """Step 3. Succeeds only if the session is still at the turn's epoch and
    base version and the turn still holds a live lease; otherwise the turn is
    aborted (`stale_turn`, its `error` event written) and nothing else
    changes. A committing turn's recorded effects are applied here, in this
    transaction. Returns the stored body, which is also the `done` event's
    data, written with the commit at `done_seq` after the run's `pending`
    events (an `interrupt` event among them): `done` is in the log exactly
    when the turn is committed."""
    faults.hit("before_commit")
    if claim is not None and done_seq is not None and not outcome.effects and not claim.resume:
        body = _commit_fenced(claim, outcome, list(pending), done_seq)
        if body is not None:
            faults.hit("after_commit")
            return body
    stale: str | None = None
    resolved_thread: str | None = None
    with transaction.atomic(durable=True):
        locked = _lock_for_commit(claim) if claim is not None else None
        locked = locked or _lock_for_turn(turn_id)
        if locked is None:
            # Deleted along with its session: what the run wrote is nobody's.
            delete_threads([outcome.thread_id] if outcome.checkpoint_id else [])
            stale = "the session was deleted while the turn ran"
        else:
            turn, session = locked
            stale = _stale_reason(turn, session)
            if stale is not None:
                _abort_locked(turn, session, "stale_turn", stale, pending=list(pending), seq=done_seq)
            else:
                resolved_thread = _commit_locked(turn, session, outcome, list(pending), done_seq)
    if stale is not None:
        raise StaleTurn(stale)
    if resolved_thread is not None:
        # The pause this turn answered is over: its checkpoints go, after the
        # commit (never lengthening its lock; a failed drop is the sweep's).
        try:
            with transaction.atomic(durable=True):
                delete_threads([resolved_thread])
        except Exception:
            logger.exception("could not drop the checkpoints of %s; the sweep will", resolved_thread)
    faults.hit("after_commit")
    return turn.result


def _lock_for_commit(claim: Claim) -> tuple[AgentTurn, AgentSession] | None:
    """The commit's usual case in one statement (issue 12): lock the session
    by the id the claim gave, and if the turn still holds it — same epoch,
    same version, live lease — the turn is pending without reading it (a
    turn's status changes only under its session's lock, and every change
    frees the session), so it is rebuilt from the claim. Anything else is
    None: the caller reads the turn and finds out why."""
    try:
        session = session_lock(session_id=claim.session_id, include_deleted=True)
    except SessionNotFound:
        return None
    if (
        session.is_deleted
        or session.epoch != claim.epoch
        or session.version != claim.base_version
        or session.active_turn_id != claim.turn_id
        or not session.has_live_turn(session.db_now)
    ):
        return None
    turn = AgentTurn(
        id=claim.turn_id,
        session_id=session.id,
        epoch=claim.epoch,
        number=claim.number,
        base_version=claim.base_version,
        status=AgentTurn.Status.PENDING,
        idempotency_key=claim.idempotency_key,
        request=claim.request,
    )
    turn._state.adding = False  # an existing row: save() updates it
    return turn, session


def _stale_reason(turn: AgentTurn, session: AgentSession) -> str | None:
    if turn.status != AgentTurn.Status.PENDING:
        return f"the turn is already {turn.status}"
    if session.is_deleted or session.epoch != turn.epoch:
        return "the session was deleted while the turn ran"
    if session.version != turn.base_version:
        return "the session's version moved while the turn ran"
    if session.active_turn_id != turn.id or not session.has_live_turn(session.db_now):
        return "the turn lost its lease on the session"
    return None


# What a commit writes: the session's columns (and turn_count + 1), the turn's.
COMMIT_SESSION_FIELDS = (
    "fields", "stage", "head_turn_id", "interrupt", "version", "active_turn_id", "lease_expires_at", "updated_at",
)
COMMIT_TURN_FIELDS = (
    "status", "messages", "replaces_history", "message_count", "fields", "stage",
    "values", "version", "interrupts", "effects", "checkpoint_id", "result",
)


def _settle(turn: AgentTurn, session: AgentSession, outcome: Outcome, applied: list[dict[str, Any]]) -> None:
    """The session and the turn as the commit leaves them, in memory (all
    but `turn_count` and `finished_at`, which the callers set)."""
    turn.status = AgentTurn.Status.INTERRUPTED if outcome.interrupts else AgentTurn.Status.COMMITTED
    session.fields = outcome.fields
    session.stage = outcome.stage
    session.head_turn_id = turn.id
    session.interrupt = (
        {
            "turn_id": str(turn.id),
            "thread_id": outcome.thread_id,
            "checkpoint_id": outcome.checkpoint_id,
            "interrupts": outcome.interrupts,
        }
        if outcome.interrupts
        else None
    )
    session.version += 1
    session.active_turn_id = None
    session.lease_expires_at = None
    turn.messages = outcome.new_messages
    turn.replaces_history = outcome.replaces_history
    turn.message_count = outcome.message_count
    turn.fields = session.fields
    turn.stage = session.stage
    turn.values = outcome.values
    turn.version = session.version
    turn.interrupts = outcome.interrupts or None
    turn.effects = applied or None
    turn.checkpoint_id = outcome.checkpoint_id
    turn.result = render_result(turn, session, outcome, applied)


def _commit_locked(
    turn: AgentTurn, session: AgentSession, outcome: Outcome, pending: list[TurnEvent], done_seq: int | None
) -> str | None:
    """Call with the session locked and the turn fenced in. Returns the
    checkpoint thread of a pause this turn resolved, if any."""
    context = effects.TurnContext(
        session_id=session.id, epoch=turn.epoch, turn_id=turn.id, idempotency_key=turn.idempotency_key
    )
    applied = effects.apply_all(outcome.effects, context)
    answered = session.interrupt if "resume" in turn.request else None
    _settle(turn, session, outcome, applied)
    session.turn_count += 1
    turn.finished_at = session.db_now
    done = _terminal(turn, "done", turn.result, pending, done_seq)
    rows.execute(
        [
            rows.update_statement(session, [*COMMIT_SESSION_FIELDS, "turn_count"]),
            rows.update_statement(turn, [*COMMIT_TURN_FIELDS, "finished_at"]),
            *_events_statements(turn.id, [*pending, done]),
        ]
    )
    if answered is not None and session.interrupt is None:
        return answered["thread_id"]
    return None


def _commit_fenced(claim: Claim, outcome: Outcome, pending: list[TurnEvent], done_seq: int) -> str | None:
    """The usual commit — no effects to apply, no pause answered — as one
    transaction of its own, one round trip on PostgreSQL (issue 12: BEGIN,
    the lock, the writes and COMMIT were four). The session's update is
    fenced in its own WHERE: the turn still holds it (same epoch, same
    version, a live lease by the database's clock), checked on the row as
    it is once locked. The turn's row and its events are written only where
    that update happened. Returns the stored body; None when the fence did
    not hold, and then nothing was written: the caller's locking path finds
    out why and aborts the turn."""
    session = session_as_claimed(session_id=claim.session_id, epoch=claim.epoch, version=claim.base_version)
    turn = AgentTurn(
        id=claim.turn_id, session_id=claim.session_id, epoch=claim.epoch, number=claim.number,
        base_version=claim.base_version, idempotency_key=claim.idempotency_key, request=claim.request,
    )
    turn._state.adding = False  # an existing row: updated, not inserted
    _settle(turn, session, outcome, [])
    now = rows.clock()
    uuid_field = AgentTurn._meta.pk
    still_held = (
        f'"deleted_at" IS NULL AND "epoch" = %s AND "version" = %s AND "active_turn_id" = %s '
        f'AND "lease_expires_at" > {now[0]}',
        [claim.epoch, claim.base_version, uuid_field.get_db_prep_value(claim.turn_id, connection), *now[1]],
    )
    committed_here = (
        'EXISTS (SELECT 1 FROM "agent_sessions" WHERE "id" = %s AND "head_turn_id" = %s AND "version" = %s)',
        [
            uuid_field.get_db_prep_value(claim.session_id, connection),
            uuid_field.get_db_prep_value(claim.turn_id, connection),
            session.version,
        ],
    )
    done = TurnEvent(done_seq, "done", turn.result)
    events = _event_rows(turn.id, [*pending, done])
    returned = rows.first_row_in_own_transaction(
        [
            rows.update_if_statement(
                session, COMMIT_SESSION_FIELDS, *still_held,
                expressions={"turn_count": ('"turn_count" + 1', [])}, returning_clock=True,
            ),
            # The turn's row before its events, as `_terminal` says.
            rows.update_if_statement(turn, COMMIT_TURN_FIELDS, *committed_here, expressions={"finished_at": now}),
            *rows.insert_statements(events, ignore_conflicts=True, where=committed_here),
        ]
    )
    if returned is None:
        return None
    wake_followers(turn.id)
    return turn.result


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
    run's `pending` ones, at `seq` if the run reserved it) and frees the
    session if the turn holds it. Call only once the run is over. Returns the
    turn's final event as stored — this one, or the one that ended it before
    (a stale commit's, a cancel's) — or None when the turn is gone with its
    session (then a checkpoint its run persisted, `thread_id`, is dropped)."""
    with transaction.atomic(durable=True):
        locked = _lock_for_turn(turn_id)
        if locked is None:
            delete_threads([thread_id] if thread_id else [])
            return None
        turn, session = locked
        _abort_locked(turn, session, code, message, pending=list(pending), seq=seq)
        last = AgentTurnEvent.objects.filter(turn=turn).order_by("-seq").first()
        return TurnEvent(last.seq, last.event, last.data) if last is not None else None


def turn_cancel(*, owner: str, key: str, turn_id: UUID) -> AgentTurn:
    """Cancel a turn, whichever process runs it: a pending turn is aborted
    here (`turn_cancelled`, nothing of it committed, its effects dropped) and
    the process running it is told to stop. Cancelling a cancelled or failed
    turn answers its state again; a committed one is `TurnCommitted`."""
    session = session_get(owner=owner, key=key)
    with transaction.atomic(durable=True):
        session = session_lock(session_id=session.id)
        turn = AgentTurn.objects.filter(pk=turn_id, session=session, epoch=session.epoch).first()
        if turn is None:
            raise TurnNotFound()
        if turn.status in FINISHED:
            raise TurnCommitted(details={"turn_id": str(turn.id), "status": turn.status})
        if _abort_locked(turn, session, "turn_cancelled", "the turn was cancelled; nothing was committed"):
            wake_runner(turn.id)
    return turn


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


def turns_abort_pending(*, reason: str = "the server restarted before the turn committed") -> int:
    """Start-up in single-process (SQLite) mode: nothing else can be running a
    turn, so every `pending` turn is dead. Returns how many were aborted."""
    pending = list(AgentTurn.objects.filter(status=AgentTurn.Status.PENDING).values_list("id", flat=True))
    for turn_id in pending:
        turn_abort(turn_id=turn_id, code="server_restarted", message=reason)
    return len(pending)


def events_compact(*, older_than_seconds: float | None = None) -> int:
    """Compact the logs of turns that ended more than the retention time ago
    to their first (`turn`) and final (`done`/`error`) events: re-attaching
    still ends in the outcome. Returns how many events it removed."""
    seconds = settings.AGENT_EVENT_RETENTION_SECONDS if older_than_seconds is None else older_than_seconds
    final = AgentTurnEvent.objects.filter(turn=OuterRef("turn")).order_by("-seq").values("seq")[:1]
    doomed = (
        AgentTurnEvent.objects.filter(
            turn__finished_at__lt=Now() - timedelta(seconds=seconds),
            turn__status__in=[*FINISHED, AgentTurn.Status.ABORTED],
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


# --- a session's history -------------------------------------------------------------------


def _history_turn(session: AgentSession, turn_id: UUID | None) -> AgentTurn | None:
    """A committed turn of the session's current epoch (None: the start)."""
    if turn_id is None:
        return None
    turn = AgentTurn.objects.filter(
        pk=turn_id, session=session, epoch=session.epoch, status=AgentTurn.Status.COMMITTED
    ).first()
    if turn is None:
        raise TurnNotFound("no committed turn with this id in the session (an interrupted one cannot be a start)")
    return turn


def session_rewind(*, owner: str, key: str, turn_id: UUID | None, expected_version: int) -> AgentSession:
    """Take the session back to just after `turn_id` (None: before the first
    turn): its conversation, fields and stage become that turn's, the version
    moves on, and the turns after it stay in the log, marked superseded. The
    next turn starts from there. Version-conditional; refused while a turn
    runs. A pause the rewind leaves behind is dropped with its checkpoints."""
    session = session_get(owner=owner, key=key)
    with transaction.atomic(durable=True):
        session = session_lock(session_id=session.id)
        if session.version != expected_version:
            raise VersionConflict(
                f"the session is at version {session.version}, not {expected_version}",
                details={"version": session.version},
            )
        _expire_dead_turn(session)
        if session.has_live_turn(session.db_now):
            raise SessionBusy(holder=session.active_turn_id)
        target = _history_turn(session, turn_id)
        if target is not None and target.id not in chain_ids(session.head_turn_id):
            raise TurnNotFound("the turn is not on the way to the session's current state")
        _rewind_locked(session, target)
        return session


def _rewind_locked(session: AgentSession, target: AgentTurn | None) -> None:
    """Call with the session locked and no live turn on it. The session's
    state becomes the one just after `target` (None: the start), which may
    be on another branch of the epoch's history: the turns on the way to the
    old head and not to the new one are marked superseded, those on the way
    to the new one no longer are. A pause left behind is dropped with its
    checkpoints; the version moves on."""
    old = set(chain_ids(session.head_turn_id))
    new = set(chain_ids(target.id)) if target is not None else set()
    AgentTurn.objects.filter(pk__in=old - new).update(superseded_at=session.db_now)
    AgentTurn.objects.filter(pk__in=new, superseded_at__isnull=False).update(superseded_at=None)
    if session.interrupt is not None:
        delete_threads([session.interrupt["thread_id"]])
    session.head_turn_id = target.id if target is not None else None
    session.fields = (target.fields if target is not None else None) or {}
    session.stage = (target.stage if target is not None else None) or session.DEFAULT_STAGE
    session.interrupt = None
    session.version += 1
    session.save(update_fields=["head_turn_id", "fields", "stage", "interrupt", "version", "updated_at"])


def session_fork(*, owner: str, key: str, turn_id: UUID | None, new_key: str) -> AgentSession:
    """A new session of the same owner, graph and form, starting from the
    state just after `turn_id` (None: the start) of this one: the turns up
    to it are copied, so the two histories are independent from here on."""
    source = session_get(owner=owner, key=key)
    target = _history_turn(source, turn_id)
    chain = chain_ids(target.id) if target is not None else []
    turns = {t.id: t for t in AgentTurn.objects.filter(pk__in=chain)}
    # One commit: a crash or error mid-copy leaves no half-forked session.
    with transaction.atomic(durable=True):
        fork = session_insert(
            owner=owner, key=new_key, form=source.form, metadata=source.metadata, graph=source.graph
        )
        fork = session_lock(session_id=fork.id)
        parent = None
        for number, original_id in enumerate(chain, start=1):
            original = turns[original_id]
            copy = AgentTurn.objects.create(
                session=fork,
                epoch=fork.epoch,
                number=number,
                base_version=number - 1,
                parent_id=parent,
                graph=original.graph,
                status=original.status,
                request_digest=original.request_digest,
                request=original.request,
                result=original.result,
                messages=original.messages,
                replaces_history=original.replaces_history,
                message_count=original.message_count,
                fields=original.fields,
                stage=original.stage,
                values=original.values,
                version=number,
                finished_at=original.finished_at,
            )
            parent = copy.id
        fork.head_turn_id = parent
        fork.fields = (target.fields if target is not None else None) or {}
        fork.stage = (target.stage if target is not None else None) or fork.DEFAULT_STAGE
        fork.version = len(chain)
        fork.turn_count = len(chain)
        fork.save(update_fields=["head_turn_id", "fields", "stage", "version", "turn_count", "updated_at"])
    return fork


def session_turns_purge(*, session: AgentSession, **_: object) -> None:
    """Receiver of `sessions_app.signals.session_deleting`, inside the
    delete's transaction with the session locked: drop every checkpoint
    thread and every turn of the session, so they go with the tombstone or
    not at all. Connected in `TurnsAppConfig.ready`."""
    # Locked first: a running turn's event batch (written outside the
    # session's lock) takes a key-share lock on its turn row, so it either
    # lands before this and is deleted with the turn, or waits and then
    # finds the turn gone. Unlocked, a batch landing between the cascade's
    # read and the commit breaks the foreign key (PostgreSQL).
    turns = list(AgentTurn.objects.select_for_update().filter(session=session).values_list("id", "epoch"))
    delete_threads(sorted({checkpoint_thread_id(session.id, epoch, turn_id) for turn_id, epoch in turns}))
    AgentTurn.objects.filter(session=session).delete()

