"""Step 3 of a turn, the commit: succeeds only while the turn still holds
its session — same epoch, same base version, a live lease — and then writes
the session's new state, the turn's row, its events up to `done` and the
effects it recorded, in one transaction; otherwise the turn is aborted
(`stale_turn`) and nothing else changes (docs/turn-protocol.md, "Commit"
and "Fencing"). The usual commit is one statement of its own, fenced in its
WHERE clauses ("One-statement commit"); anything else takes the lock."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import connection, transaction

from core import rows
from core.errors import SessionNotFound, StaleTurn
from graphs.runtime import effects
from sessions_app.services import LockedSession, session_as_claimed, session_lock
from turns_app import faults
from turns_app.checkpoint_tables import delete_threads
from turns_app.models import AgentTurn
from turns_app.services.abort import abort_locked
from turns_app.services.event_rows import event_rows, events_statements, final_event
from turns_app.services.session_history import supersede_for
from turns_app.services.turn_lock import lock_for_turn
from turns_app.types import Claim, Outcome, TurnEvent
from turns_app.wakeups import wake_followers

if TYPE_CHECKING:
    from sessions_app.selectors import AgentSession

logger = logging.getLogger(__name__)

# The table a turn's session key points at: AgentSession's (sessions_app's
# model, which this app does not import).
SESSIONS = AgentTurn._meta.get_field("session").target_field.model._meta.db_table

# What a commit writes: the session's columns (and turn_count + 1), the turn's.
COMMIT_SESSION_FIELDS = (
    "fields",
    "stage",
    "head_turn_id",
    "interrupt",
    "version",
    "active_turn_id",
    "lease_expires_at",
    "updated_at",
)
COMMIT_TURN_FIELDS = (
    "status",
    "messages",
    "replaces_history",
    "message_count",
    "fields",
    "stage",
    "values",
    "version",
    "interrupts",
    "effects",
    "checkpoint_id",
    "steps",
    "result",
)
# The one-statement commit's fence on the session row: the turn still holds
# it, its lease live by the database's clock ({now}: rows.clock()).
STILL_HELD = (
    '"deleted_at" IS NULL AND "epoch" = %s AND "version" = %s AND "active_turn_id" = %s AND "lease_expires_at" > {now}'
)
# The turn's row and its events are written only where the session's update
# just happened: the session's head is this turn, at the version it made.
COMMITTED_HERE = f'EXISTS (SELECT 1 FROM "{SESSIONS}" WHERE "id" = %s AND "head_turn_id" = %s AND "version" = %s)'


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
    pending: Sequence[TurnEvent] = (),
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
    if (
        claim is not None
        and done_seq is not None
        and not outcome.effects
        and claim.interrupt is None
        and not claim.rewinds
    ):
        body = _commit_fenced(claim, outcome, list(pending), done_seq)
        if body is not None:
            faults.hit("after_commit")
            return body
    stale: str | None = None
    resolved_thread: str | None = None
    with transaction.atomic(durable=True):
        found = _lock_for_commit(claim) if claim is not None else None
        found = found or lock_for_turn(turn_id)
        if found is None:
            # Deleted along with its session: what the run wrote is nobody's.
            delete_threads([outcome.thread_id] if outcome.checkpoint_id else [])
            stale = "the session was deleted while the turn ran"
        else:
            turn, locked = found
            stale = _stale_reason(turn, locked)
            if stale is not None:
                abort_locked(locked, turn, code="stale_turn", message=stale, pending=list(pending), seq=done_seq)
            else:
                committed, resolved_thread = _commit_locked(locked, turn, outcome, list(pending), done_seq)
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
    return committed


def _lock_for_commit(claim: Claim) -> tuple[AgentTurn, LockedSession] | None:
    """The commit's usual case in one statement: lock the session by the id
    the claim gave, and if the turn still holds it — same epoch, same
    version, live lease — the turn is pending without reading it (a turn's
    status changes only under its session's lock, and every change frees
    the session), so it is rebuilt from the claim. Anything else is None:
    the caller reads the turn and finds out why."""
    try:
        locked = session_lock(session_id=claim.session_id, include_deleted=True)
    except SessionNotFound:
        return None
    session = locked.session
    if (
        session.is_deleted
        or session.epoch != claim.epoch
        or session.version != claim.base_version
        or session.active_turn_id != claim.turn_id
        or not session.has_live_turn(locked.now)
    ):
        return None
    turn = AgentTurn(
        id=claim.turn_id,
        session_id=session.id,
        epoch=claim.epoch,
        number=claim.number,
        base_version=claim.base_version,
        parent_id=claim.parent_id,
        status=AgentTurn.Status.PENDING,
        idempotency_key=claim.idempotency_key,
        request=claim.request,
    )
    turn._state.adding = False  # an existing row: save() updates it
    return turn, locked


def _stale_reason(turn: AgentTurn, locked: LockedSession) -> str | None:
    session = locked.session
    if turn.status != AgentTurn.Status.PENDING:
        return f"the turn is already {turn.status}"
    if session.is_deleted or session.epoch != turn.epoch:
        return "the session was deleted while the turn ran"
    if session.version != turn.base_version:
        return "the session's version moved while the turn ran"
    if session.active_turn_id != turn.id or not session.has_live_turn(locked.now):
        return "the turn lost its lease on the session"
    return None


def _settle(turn: AgentTurn, session: AgentSession, outcome: Outcome, applied: list[dict[str, Any]]) -> str:
    """The session and the turn as the commit leaves them, in memory (all
    but `turn_count` and `finished_at`, which the callers set). Returns the
    turn's stored body (`turn.result`)."""
    turn.status = AgentTurn.Status.INTERRUPTED if outcome.paused else AgentTurn.Status.COMMITTED
    session.fields = outcome.fields
    session.stage = outcome.stage
    session.head_turn_id = turn.id
    session.interrupt = (
        {
            "turn_id": str(turn.id),
            "thread_id": outcome.thread_id,
            "checkpoint_id": outcome.checkpoint_id,
            "interrupts": outcome.interrupts,
            "next": outcome.next_nodes,
        }
        if outcome.paused
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
    turn.steps = outcome.steps or None
    turn.result = body = render_result(turn, session, outcome, applied)
    return body


def _commit_locked(
    locked: LockedSession, turn: AgentTurn, outcome: Outcome, pending: list[TurnEvent], done_seq: int | None
) -> tuple[str, str | None]:
    """The turn fenced in (`_stale_reason` found nothing). Returns the
    stored body and the checkpoint thread of a pause this turn resolved, if
    any."""
    session = locked.session
    context = effects.TurnContext(
        session_id=session.id, epoch=turn.epoch, turn_id=turn.id, idempotency_key=turn.idempotency_key
    )
    applied = effects.apply_all(outcome.effects, context)
    # The pause the session waited on when the turn started: answered by it,
    # or left behind by the rewind it started with.
    answered = session.interrupt
    if turn.parent_id != session.head_turn_id:
        # The turn started from an earlier committed state: the rewind there
        # commits here, with the turn (docs/turn-protocol.md, "Claim").
        supersede_for(locked, turn.parent_id)
    body = _settle(turn, session, outcome, applied)
    session.turn_count += 1
    turn.finished_at = locked.now
    done = final_event("done", body, done_seq)
    rows.execute(
        [
            rows.update_statement(session, [*COMMIT_SESSION_FIELDS, "turn_count"]),
            rows.update_statement(turn, [*COMMIT_TURN_FIELDS, "finished_at"]),
            *events_statements(turn.id, [*pending, done]),
        ]
    )
    if answered is not None and (session.interrupt is None or session.interrupt["thread_id"] != answered["thread_id"]):
        return body, answered["thread_id"]
    return body, None


def _commit_fenced(claim: Claim, outcome: Outcome, pending: list[TurnEvent], done_seq: int) -> str | None:
    """The usual commit — no effects to apply, no pause answered — as one
    transaction of its own, one round trip on PostgreSQL. The session's
    update is fenced in its own WHERE (STILL_HELD), checked on the row as
    it is once locked. The turn's row and its events are written only where
    that update happened (COMMITTED_HERE). Returns the stored body; None
    when the fence did not hold, and then nothing was written: the caller's
    locking path finds out why and aborts the turn."""
    session = session_as_claimed(session_id=claim.session_id, epoch=claim.epoch, version=claim.base_version)
    turn = AgentTurn(
        id=claim.turn_id,
        session_id=claim.session_id,
        epoch=claim.epoch,
        number=claim.number,
        base_version=claim.base_version,
        idempotency_key=claim.idempotency_key,
        request=claim.request,
    )
    turn._state.adding = False  # an existing row: updated, not inserted
    body = _settle(turn, session, outcome, [])
    now = rows.clock()
    uuid_field = AgentTurn._meta.pk
    still_held = (
        STILL_HELD.format(now=now[0]),
        [claim.epoch, claim.base_version, uuid_field.get_db_prep_value(claim.turn_id, connection), *now[1]],
    )
    committed_here = (
        COMMITTED_HERE,
        [
            uuid_field.get_db_prep_value(claim.session_id, connection),
            uuid_field.get_db_prep_value(claim.turn_id, connection),
            session.version,
        ],
    )
    done = TurnEvent(done_seq, "done", body)
    events = event_rows(turn.id, [*pending, done])
    returned = rows.first_row_in_own_transaction(
        [
            rows.update_if_statement(
                session,
                COMMIT_SESSION_FIELDS,
                *still_held,
                expressions={"turn_count": ('"turn_count" + 1', [])},
                returning_clock=True,
            ),
            # The turn's row before its events, as `final_event` says.
            rows.update_if_statement(turn, COMMIT_TURN_FIELDS, *committed_here, expressions={"finished_at": now}),
            *rows.insert_statements(events, ignore_conflicts=True, where=committed_here),
        ]
    )
    if returned is None:
        return None
    wake_followers(turn.id)
    return body
