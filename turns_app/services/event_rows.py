"""The rows of a turn's events (`agent_turn_events`): a running turn's
batches, written outside the session's lock, and its final event (`done` or
`error`), written under it. Reading and following the log is
turns_app.events; this module only writes it."""

from __future__ import annotations

import json
from uuid import UUID

from django.db import IntegrityError, transaction

from core import rows
from sessions_app.services import LockedSession
from turns_app.models import AgentTurn, AgentTurnEvent
from turns_app.stream_parts import stored_form
from turns_app.types import TurnEvent
from turns_app.wakeups import wake_followers

# The id of a final event written by anyone but the run (a cancel, an
# expired lease, the start-up abort): the run shows deltas before their
# batch is written, so no writer elsewhere knows which ids its clients hold,
# and a batch in flight may land after the final event. Past any id a run
# can reach (the column's largest value), the final event is still the
# log's last, and never shares an id a client saw
# (docs/storage.md, "Event log").
OUTSIDE_FINAL_SEQ = 2**31 - 1


def event_rows(turn_id: UUID, events: list[TurnEvent]) -> list[AgentTurnEvent]:
    return [AgentTurnEvent(turn_id=turn_id, seq=e.id, event=e.event, data=stored_form(e.data)) for e in events]


def events_statements(turn_id: UUID, events: list[TurnEvent]) -> list[rows.Statement]:
    """Call inside a transaction. An event already written (a batch retried
    after its answer was lost) is skipped, not duplicated. Followers are
    woken when the transaction commits."""
    if not events:
        return []
    wake_followers(turn_id)
    return rows.insert_statements(event_rows(turn_id, events), ignore_conflicts=True)


def write_events(turn_id: UUID, events: list[TurnEvent]) -> None:
    rows.execute(events_statements(turn_id, events))


def final_event(event: str, data: str, seq: int | None) -> TurnEvent:
    """A turn's final event, at `seq` (the run's next id, given by the run
    once its batches are written) or else at OUTSIDE_FINAL_SEQ. Write it
    under its session's lock (no other final event can come meanwhile),
    after the turn's row was updated, in the same transaction: a follower
    registering meanwhile waits on that row (wakeups.follow;
    docs/turn-protocol.md, "Order of a final event's writes")."""
    return TurnEvent(OUTSIDE_FINAL_SEQ if seq is None else seq, event, data)


def write_final_event(
    locked: LockedSession, turn: AgentTurn, event: str, data: str, pending: list[TurnEvent], seq: int | None
) -> TurnEvent:
    """The run's unwritten events, then the final one, with the turn's
    session `locked`."""
    final = final_event(event, data, seq)
    write_events(turn.id, [*pending, final])
    return final


def copied_log(turn: AgentTurn) -> list[TurnEvent]:
    """The log of a finished turn copied into another session (a fork, a
    thread's copy), as compaction leaves every finished turn's: its first
    event (the claim's, turns_app.services.claim.turn_event_data) and its
    final `done`, the copy's stored body. A copy is a finished turn like
    any other: join, re-attach and replay end in its outcome
    (docs/api.md, "History, rewind and fork")."""
    assert turn.result is not None, f"turn {turn.id} is not finished"
    first = {"turn_id": str(turn.id), "epoch": turn.epoch, "number": turn.number, "base_version": turn.base_version}
    return [TurnEvent(1, "turn", json.dumps(first, ensure_ascii=False)), TurnEvent(2, "done", turn.result)]


def events_append(*, turn_id: UUID, events: list[TurnEvent]) -> bool:
    """A batch of a running turn's events, written outside the session's
    lock (events order themselves by `seq`). False if the turn is gone
    (deleted with its session): nobody will read them."""
    try:
        with transaction.atomic(durable=True):
            write_events(turn_id, events)
    except IntegrityError:
        if AgentTurn.objects.filter(pk=turn_id).exists():
            raise
        return False
    return True
