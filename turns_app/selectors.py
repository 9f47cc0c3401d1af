"""Reads of turns, their event logs and transcripts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Count, F

from core.errors import TurnNotFound
from sessions_app.selectors import AgentSession, session_get
from turns_app import checkpoint_tables, history, stream_parts

# AgentTurn is also the type of what these reads return: the apps above name
# it (and its Status) from here, never from turns_app.models.
from turns_app.models import FINISHED, AgentTurn, AgentTurnEvent
from turns_app.types import TurnEvent


def turn_list(*, owner: str, key: str) -> list[AgentTurn]:
    """The current epoch's turns, oldest first."""
    session = session_get(owner=owner, key=key)
    return list(AgentTurn.objects.filter(session=session, epoch=session.epoch).order_by("number"))


def turn_numbers_from(
    *, owner: str, key: str, number: int | None, limit: int = 100
) -> tuple[int, list[tuple[UUID, int]]]:
    """The session's epoch, and its turns of that epoch numbered `number`
    or more (None: its newest turn only), oldest first, as (id, number):
    what a thread stream follows."""
    session = session_get(owner=owner, key=key)
    turns = AgentTurn.objects.filter(session=session, epoch=session.epoch)
    if number is None:
        rows = turns.order_by("-number")
        limit = 1
    else:
        rows = turns.filter(number__gte=number).order_by("number")
    return session.epoch, [(turn_id, n) for turn_id, n in rows.values_list("id", "number")[:limit]]


def turn_list_finished(*, session: AgentSession) -> list[AgentTurn]:
    """The current epoch's committed and interrupted turns, oldest first,
    without their messages, result and effects (the protocol's states)."""
    turns = AgentTurn.objects.filter(session=session, epoch=session.epoch, status__in=FINISHED)
    return list(turns.defer("messages", "result", "effects").order_by("number"))


def thread_turn_finished(*, owner: str, key: str, turn_id: UUID) -> AgentTurn | None:
    """One committed or interrupted turn of the current epoch of the live
    session `key` of `owner`, without its messages, result, effects and step
    records (the state after it), the session read with it (`turn.session`)
    in one statement: a run's answer costs one read, not two (docs/scale.md,
    "Round trips"). None when the turn or the session is not there (the
    caller tells which)."""
    turns = AgentTurn.objects.select_related("session").filter(
        pk=turn_id,
        session__owner=owner,
        session__key=key,
        session__deleted_at__isnull=True,
        epoch=F("session__epoch"),
        status__in=FINISHED,
    )
    return turns.defer("messages", "result", "effects", "steps").first()


def stored_messages(*, session_id: UUID, head_turn_id: UUID | None) -> list[dict[str, Any]]:
    """`message_list` (not to be changed: copy what you change), from this
    process's cache of the conversation when it holds that head (no read:
    the cost is what the last turns added), else read from the turns."""
    if head_turn_id is None:
        return []
    cached = history.cache().stored(session_id, head_turn_id)
    return cached if cached is not None else message_list(head_turn_id=head_turn_id)


def message_data(stored_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored messages as the Agent Protocol shows them: each one's data
    (a fresh dict), with its type."""
    out = [dict(stored.get("data") or {}) for stored in stored_messages]
    for data, stored in zip(out, stored_messages, strict=True):
        data.setdefault("type", stored.get("type"))
    return out


def turn_list_newest_first(*, session: AgentSession) -> list[AgentTurn]:
    """The current epoch's turns, newest first, without their messages,
    result and values (the protocol's runs)."""
    turns = AgentTurn.objects.filter(session=session, epoch=session.epoch)
    return list(turns.defer("messages", "result", "values").order_by("-number"))


def turn_in_epoch(*, session: AgentSession, turn_id: UUID) -> AgentTurn | None:
    """A turn of the session's current epoch, or None."""
    return AgentTurn.objects.filter(pk=turn_id, session=session, epoch=session.epoch).first()


def message_list(*, head_turn_id: UUID | None) -> list[dict[str, Any]]:
    """The stored messages (message_to_dict) of the conversation up to
    `head_turn_id`, oldest first."""
    return [message for _, message in history.chain_messages(head_turn_id)]


def transcript(*, owner: str, key: str) -> list[dict[str, Any]]:
    """Committed messages only: the conversation up to the session's head."""
    session = session_get(owner=owner, key=key)
    return history.transcript(session.head_turn_id)


HISTORY_STATUSES = (AgentTurn.Status.COMMITTED, AgentTurn.Status.INTERRUPTED)


def history_page(*, owner: str, key: str, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The session's committed states in its current epoch, newest first."""
    session = session_get(owner=owner, key=key)
    turns = AgentTurn.objects.filter(session=session, epoch=session.epoch, status__in=HISTORY_STATUSES)
    on_head = set(history.chain_ids(session.head_turn_id))
    page = turns.order_by("-number").only(
        "id", "number", "version", "status", "superseded_at", "fields", "stage", "message_count", "finished_at"
    )[offset : offset + limit]
    items = [
        {
            "turn_id": t.id,
            "number": t.number,
            "version": t.version,
            "status": t.status,
            "superseded": t.superseded_at is not None,
            "on_head": t.id in on_head,
            "fields": t.fields,
            "stage": t.stage,
            "message_count": t.message_count,
            "finished_at": t.finished_at,
        }
        for t in page
    ]
    return items, turns.count()


def history_state(*, owner: str, key: str, turn_id: UUID) -> dict[str, Any]:
    """The full state as of a committed turn: its conversation and fields."""
    session = session_get(owner=owner, key=key)
    turn = AgentTurn.objects.filter(
        pk=turn_id, session=session, epoch=session.epoch, status__in=HISTORY_STATUSES
    ).first()
    if turn is None:
        raise TurnNotFound()
    return {
        "turn_id": turn.id,
        "number": turn.number,
        "version": turn.version,
        "status": turn.status,
        "fields": turn.fields,
        "stage": turn.stage,
        "messages": history.transcript(turn.id),
    }


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
    return dict(AgentTurn.objects.filter(session__in=session_ids).values_list("session").annotate(n=Count("id")))


@dataclass(frozen=True)
class LoggedEvents:
    """A turn's log past a client's Last-Event-ID."""

    events: list[TurnEvent]  # seq > after, in order
    final: TurnEvent | None  # the event that ended the turn, once it has ended
    running: bool


def turn_events_after(*, turn_id: UUID, after: int) -> LoggedEvents:
    """Events of the turn with seq > `after`, as they were sent. A turn
    that has ended (or is gone with its session) has a final event; read
    together with the turn's status, so "running" and "no final event"
    always agree."""
    found = AgentTurn.objects.filter(pk=turn_id).values_list("status", "parent_id").first()
    status, parent_id = found if found is not None else (None, None)
    rows = AgentTurnEvent.objects.filter(turn_id=turn_id).order_by("seq")
    events = _as_sent(parent_id, [TurnEvent(r.seq, r.event, r.data) for r in rows.filter(seq__gt=after)])
    if status == AgentTurn.Status.PENDING:
        return LoggedEvents(events, None, True)
    last = events[-1] if events else rows.order_by("-seq").first()
    if isinstance(last, AgentTurnEvent):
        last = TurnEvent(last.seq, last.event, last.data)
    return LoggedEvents(events, last, False)


def _as_sent(parent_id: UUID | None, events: list[TurnEvent]) -> list[TurnEvent]:
    """`values` events stored with the conversation the turn started from
    by reference (turns_app.stream_parts), re-expanded: that conversation
    is the committed chain up to the turn's parent, read once."""
    base: list[dict[str, Any]] | None = None
    out = []
    for event in events:
        if event.event == "values" and stream_parts.by_reference(event.data):
            if base is None:
                base = history.conversation_json(parent_id)
            event = TurnEvent(event.id, event.event, stream_parts.expanded(event.data, base))
        out.append(event)
    return out


def database_answers() -> None:
    """Raises unless the database answers a trivial query (a liveness probe)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


# How a stored protocol event of the `lifecycle` channel begins
# (turns_app.thread_stream_parts.wire_form, written by native_json.dumps).
LIFECYCLE_PREFIX = '{"method":"lifecycle"'
VALUES_PREFIX = '{"method":"values"'


def newest_turn_lifecycle(*, owner: str, key: str) -> tuple[str, list[str]] | None:
    """The session's newest turn of its epoch: its status, and the stored
    lifecycle protocol events of its subgraphs, oldest first (each a small
    JSON object; the rest of its log is not read). None: no turn yet."""
    session = session_get(owner=owner, key=key)
    turn = (
        AgentTurn.objects.filter(session=session, epoch=session.epoch)
        .order_by("-number")
        .values_list("id", "status")
        .first()
    )
    if turn is None:
        return None
    rows = AgentTurnEvent.objects.filter(turn_id=turn[0], event="protocol", data__startswith=LIFECYCLE_PREFIX)
    return str(turn[1]), list(rows.order_by("seq").values_list("data", flat=True))


def has_turn_with_key(*, owner: str, key: str, idempotency_key: str) -> bool:
    """Whether the session's epoch has a turn under this Idempotency-Key that
    did not abort (one a retry of its request replays)."""
    session = session_get(owner=owner, key=key)
    turns = AgentTurn.objects.filter(session=session, epoch=session.epoch, idempotency_key=idempotency_key)
    return turns.exclude(status=AgentTurn.Status.ABORTED).exists()


def interrupt_namespaces(*, turn_id: UUID, interrupt_ids: list[str]) -> dict[str, list[str]]:
    """Each interrupt's subgraph namespace, where the turn's v3 stream first
    showed it (the deepest: a subgraph's values come before its parent's);
    an interrupt of the root graph is not in the result."""
    found: dict[str, list[str]] = {}
    for interrupt_id in interrupt_ids:
        row = (
            AgentTurnEvent.objects.filter(
                turn_id=turn_id, event="protocol", data__startswith=VALUES_PREFIX, data__contains=f'"{interrupt_id}"'
            )
            .order_by("seq")
            .values_list("data", flat=True)
            .first()
        )
        logged = json.loads(row) if row is not None else None
        if isinstance(logged, dict) and interrupt_id in (logged.get("interrupt_ids") or ()):
            found[interrupt_id] = [str(s) for s in logged.get("namespace") or ()]
    return found


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def session_storage(session: AgentSession) -> dict[str, Any]:
    """What the session's history occupies, in the shape of LangGraph's
    thread storage report (docs/agent-protocol.md, "Thread lifecycle"):
    `checkpoints` are the step records its turns keep, `channel_values` the
    channels each turn stored (its messages and other values, as JSON), and
    `pending_writes` what a paused run keeps in the checkpointer's tables
    for its resume. A scan of the session's turns: not for hot paths."""
    checkpoints = {"count": 0, "bytes": 0}
    by_channel: dict[str, dict[str, int]] = {}
    rows = AgentTurn.objects.filter(session=session, epoch=session.epoch).values_list("steps", "messages", "values")
    for steps, messages, values in rows.iterator():
        for record in steps or ():
            checkpoints["count"] += 1
            checkpoints["bytes"] += _json_bytes(record)
        channels = {**(values or {}), **({"messages": messages} if messages else {})}
        for name, value in channels.items():
            entry = by_channel.setdefault(name, {"versions": 0, "bytes": 0})
            entry["versions"] += 1
            entry["bytes"] += _json_bytes(value)
    paused = checkpoint_tables.thread_storage(f"{session.id}:{session.epoch}:")
    pending = {"count": paused["rows"], "bytes": paused["bytes"]}
    channel_bytes = sum(e["bytes"] for e in by_channel.values())
    return {
        "total_bytes": checkpoints["bytes"] + channel_bytes + pending["bytes"],
        "checkpoints": checkpoints,
        "channel_values": {
            "count": sum(e["versions"] for e in by_channel.values()),
            "bytes": channel_bytes,
            "by_channel": by_channel,
        },
        "pending_writes": pending,
    }
