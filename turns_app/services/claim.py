"""Step 1 of a turn, the claim: one short durable transaction that locks the
session, resolves the idempotency key, expires a dead turn, and inserts a
`pending` turn holding the session's lease — or, for a new session's first
turn, one statement that creates the session and its turn together
(docs/turn-protocol.md, "Claim")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.db import connection, transaction

from core import rows
from core.errors import (
    GraphMismatch,
    GraphWithoutMessages,
    IdempotencyConflict,
    InterruptPending,
    InterruptResolved,
    SessionBusy,
    SessionNotFound,
    TurnInProgress,
    TurnNotFound,
    VersionConflict,
)
from graphs.runtime.registry import FIELDS, MESSAGES, STAGE, shape_for
from sessions_app.selectors import check_session_key
from sessions_app.services import (
    LockedSession,
    insert_under_quota,
    inserted,
    new_session,
    revive_if_deleted,
    session_create_locked,
    session_lock,
)
from turns_app import known_sessions
from turns_app.graph_input import NOT_CARRIED
from turns_app.models import FINISHED, AgentTurn
from turns_app.services.event_rows import event_rows, events_statements
from turns_app.services.idempotency import request_digest
from turns_app.services.lease import expire_dead_turn
from turns_app.services.session_history import history_turn
from turns_app.types import Claim, Replay, StartFrom, StepStart, TurnEvent, needs_pause, stream_modes_of
from turns_app.wakeups import wake_followers

if TYPE_CHECKING:
    from sessions_app.selectors import AgentSession

TURNS = AgentTurn._meta.db_table
# LangGraph's task that writes a run's input.
START = "__start__"
# The table a turn's session key points at: AgentSession's (sessions_app's
# model, which this app does not import).
SESSIONS = AgentTurn._meta.get_field("session").target_field.model._meta.db_table

# The head turn's carried channel values and the epoch's last turn number,
# in one statement, read after the lock (sessions_app.locking says why).
CLAIM_READS = (
    f'SELECT (SELECT "values" FROM "{TURNS}" WHERE "id" = %s), '
    f'(SELECT MAX("number") FROM "{TURNS}" WHERE "session_id" = %s AND "epoch" = %s)'
)
# A new session's turn and its event are inserted only where the session's
# insert happened: under the quota, on a key nobody had.
SESSION_EXISTS = f'EXISTS (SELECT 1 FROM "{SESSIONS}" WHERE "id" = %s)'


def turn_event_data(turn: AgentTurn) -> str:
    """The first event of every turn's stream."""
    return json.dumps(
        {"turn_id": str(turn.id), "epoch": turn.epoch, "number": turn.number, "base_version": turn.base_version},
        ensure_ascii=False,
    )


def turn_claim(
    *,
    owner: str,
    key: str,
    request: dict[str, Any],
    idempotency_key: str | None,
    graph: str | None = None,
    start_from: StartFrom | None = None,
    expected_version: int | None = None,
) -> Claim | Replay:
    """Step 1. Resolves the idempotency key, expires a dead active turn, and
    inserts a `pending` turn holding the session's lease. Raises `SessionBusy`
    when a live turn holds the session (the caller decides whether to wait),
    `InterruptPending` for an /api/ message while the graph waits for a
    resume, `InterruptResolved` for a resume with nothing to resume and
    `GraphWithoutMessages` for an /api/ turn on a graph that takes none. A
    turn claimed on a paused session starts from the pause (`Claim.interrupt`).

    `graph`: the graph the caller means to run; a session whose epoch has no
    finished turn yet switches to it, any other refuses (`GraphMismatch`).
    `start_from`: the committed state the turn starts from, when it is not
    the session's current one (edit / regenerate): the turn's parent, its
    conversation, fields and stage are that state's, and its commit rewinds
    the session to it (as `session_rewind` would) in the same transaction
    that makes the turn the head, so a turn that never commits rewinds
    nothing. `expected_version`: the turn is claimed only on the session at
    that version (`VersionConflict` otherwise)."""
    check_session_key(key)
    digest = request_digest(request)
    resume = needs_pause(request)
    # /api/'s own turns refuse a message while the graph waits on an
    # interrupt; a protocol run starts from the paused state instead, as on
    # LangGraph's server (docs/agent-protocol.md, "Runs").
    strict = "protocol" not in request
    if not resume and start_from is None and expected_version is None and not known_sessions.seen(owner, key):
        if strict:
            _check_takes_messages(graph or settings.AGENT_GRAPH)
        claimed = _claim_new_session(
            owner=owner, key=key, request=request, digest=digest, idempotency_key=idempotency_key, graph=graph
        )
        if claimed is not None:
            known_sessions.remember(owner, key)
            return claimed
    with transaction.atomic(durable=True):
        try:
            locked = session_lock(owner=owner, key=key, include_deleted=True)
        except SessionNotFound:
            if resume:
                raise InterruptResolved() from None  # a session that does not exist waits for nothing
            locked = session_create_locked(owner=owner, key=key)
        session = locked.session
        if not session.created_here:
            revive_if_deleted(locked)
            expire_dead_turn(locked)
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
                        # A finished turn's commit wrote its body.
                        return Replay(turn_id=previous.id, body=cast(str, previous.result))
                    raise TurnInProgress()
            if session.has_live_turn(locked.now):
                raise SessionBusy(holder=session.active_turn_id)
        if expected_version is not None and session.version != expected_version:
            raise VersionConflict(
                f"the session is at version {session.version}, not {expected_version}",
                details={"version": session.version},
            )
        if graph is not None and graph != session.graph:
            _switch_graph(locked, graph)
        if strict:
            _check_takes_messages(session.graph)
        head_values, last_number = (None, None) if session.created_here else claim_reads(locked)
        start = None
        if start_from is not None and (
            start_from.inside is not None
            or (start_from.turn_id, start_from.version) != (session.head_turn_id, session.version)
        ):
            # The run starts from an earlier committed state; the session is
            # rewound to it only by the run's commit, so a run that fails or
            # is cancelled leaves the session as it was (a pending interrupt
            # included).
            start = _start_at(session, start_from)
            head_values = start.values
            if resume:
                raise InterruptResolved()  # a committed state earlier than the pause waits for nothing
        elif resume and session.interrupt is None:
            raise InterruptResolved()
        elif strict and not resume and session.interrupt is not None:
            raise InterruptPending(details={"interrupts": session.interrupt["interrupts"]})
        turn, first = _new_turn(
            session,
            number=(last_number or 0) + 1,
            request=request,
            digest=digest,
            idempotency_key=idempotency_key,
            parent_id=start.turn_id if start is not None else session.head_turn_id,
        )
        session.lease_to(turn.id, locked.now)
        # The claim's commit is not waited for on disk: a database crash
        # that loses it loses a pending turn whose commit cannot happen
        # without it, and the turn's own commit flushes it
        # (docs/turn-protocol.md, "Claim durability on PostgreSQL").
        rows.execute(
            [
                *rows.flushed_by_next_commit(),
                *rows.insert_statements([turn]),
                *events_statements(turn.id, [first]),
                rows.update_statement(session, session.LEASE_FIELDS),
            ]
        )
    known_sessions.remember(owner, key)
    return _claim_of(session, turn, first, head_values=head_values or {}, start=start)


def _check_takes_messages(graph: str) -> None:
    """/api/'s turns are messages: refused, before anything is claimed, on a
    graph without a `messages` channel (docs/api.md, "Errors"). Its shape is
    known since start-up (check_registry), so this reads no graph."""
    if MESSAGES not in shape_for(graph).channels:
        raise GraphWithoutMessages(details={"graph": graph})


@dataclass(frozen=True)
class _Start:
    """The earlier committed state a turn starts from: just after turn
    `turn_id` (None: the start of the epoch), or at a step inside a later
    run (`step`), with that state's carried values, fields and stage."""

    turn_id: Any
    values: dict[str, Any] | None
    fields: dict[str, Any]
    stage: str
    step: StepStart | None = None


def _after(session: AgentSession, turn: AgentTurn | None) -> _Start:
    if turn is None:
        return _Start(None, None, {}, session.DEFAULT_STAGE)
    return _Start(turn.id, turn.values, turn.fields or {}, turn.stage or session.DEFAULT_STAGE)


def _start_at(session: AgentSession, start_from: StartFrom) -> _Start:
    """The state `start_from` names. One inside a finished run is rebuilt
    from that run's record of the step: its final channels with the
    step's own over them (docs/agent-protocol.md, "History"); the run's
    input checkpoint is its parent's state (the input still to run is
    dropped, as LangGraph drops it)."""
    if start_from.inside is None:
        return _after(session, history_turn(session, start_from.turn_id))
    inner = AgentTurn.objects.filter(
        pk=start_from.inside, session=session, epoch=session.epoch, status__in=FINISHED
    ).first()
    if inner is None:
        raise TurnNotFound("no finished run with this id in the session")
    parent = AgentTurn.objects.filter(pk=inner.parent_id).first() if inner.parent_id is not None else None
    base = _after(session, parent)
    if start_from.step is None or start_from.step < 0:
        return base
    records = inner.steps or []
    # The last record is the state after the run: a start of its own.
    index = next((i for i, r in enumerate(records[:-1]) if int(r["step"]) == start_from.step), None)
    if index is None:
        raise TurnNotFound("the run has no such step between its input and its end")
    record = records[index]
    changed = record.get("values") or {}
    absent = set(record.get("absent") or ())
    values = {k: v for k, v in (inner.values or {}).items() if k not in absent}
    values.update({k: v for k, v in changed.items() if k not in NOT_CARRIED})
    # The node LangGraph takes an update there to be written by: the one
    # that ran last, when a single one did.
    ran = [t["name"] for t in records[index - 1].get("tasks") or () if t["name"] != START] if index else []
    return _Start(
        base.turn_id,
        values,
        changed.get(FIELDS, inner.fields) or {},
        changed.get(STAGE, inner.stage) or session.DEFAULT_STAGE,
        StepStart(inner.id, record, ran[0] if len(ran) == 1 else None),
    )


def _new_turn(
    session: AgentSession,
    *,
    number: int,
    request: dict[str, Any],
    digest: str,
    idempotency_key: str | None,
    parent_id: Any,
) -> tuple[AgentTurn, TurnEvent]:
    """A pending turn of the session's epoch, from `parent_id`, and its first event."""
    turn = AgentTurn(
        session=session,
        epoch=session.epoch,
        number=number,
        base_version=session.version,
        parent_id=parent_id,
        graph=session.graph,
        idempotency_key=idempotency_key,
        request_digest=digest,
        request=request,
    )
    return turn, TurnEvent(1, "turn", turn_event_data(turn))


def _claim_of(
    session: AgentSession,
    turn: AgentTurn,
    first: TurnEvent,
    *,
    head_values: dict[str, Any],
    start: _Start | None = None,
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
        fields=start.fields if start is not None else session.fields,
        stage=start.stage if start is not None else session.stage,
        parent_id=turn.parent_id,
        head_values=head_values,
        interrupt=session.interrupt if start is None else None,
        stream_modes=stream_modes_of(turn.request),
        rewinds=start is not None,
        owner=session.owner,
        step_start=start.step if start is not None else None,
    )


def _claim_new_session(
    *, owner: str, key: str, request: dict[str, Any], digest: str, idempotency_key: str | None, graph: str | None
) -> Claim | None:
    """A first turn on a key with no session: creates the session holding
    that turn — the session with its lease, the turn and its `turn` event —
    as one transaction of its own, in one round trip on PostgreSQL
    (docs/turn-protocol.md, "New session in one round trip"). None when the
    session was not created (the key exists, a concurrent request created
    it first, or the owner is at the quota): then nothing was written, since
    the turn and its event are inserted only where the session row is, and
    the caller claims the usual way."""
    session = new_session(owner=owner, key=key, graph=graph)
    turn, first = _new_turn(
        session, number=1, request=request, digest=digest, idempotency_key=idempotency_key, parent_id=None
    )
    session_exists = (SESSION_EXISTS, [AgentTurn._meta.pk.get_db_prep_value(session.id, connection)])
    (event,) = event_rows(turn.id, [first])
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


def claim_reads(locked: LockedSession) -> tuple[dict[str, Any] | None, int | None]:
    """The head turn's carried channel values and the epoch's last turn
    number, in one statement (CLAIM_READS)."""
    session = locked.session
    uuid_field = AgentTurn._meta.pk
    with connection.cursor() as cursor:
        cursor.execute(
            CLAIM_READS,
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


def _switch_graph(locked: LockedSession, graph: str) -> None:
    """A session runs one graph per epoch: only one whose epoch has no
    finished turn yet may take another."""
    session = locked.session
    if AgentTurn.objects.filter(session=session, epoch=session.epoch, status__in=FINISHED).exists():
        raise GraphMismatch(f"this session runs the graph {session.graph!r}, not {graph!r}")
    session.graph = graph
    session.save(update_fields=["graph", "updated_at"])
