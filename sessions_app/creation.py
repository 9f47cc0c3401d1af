"""A new session under its owner's quota: the quota as the database counts
it (OwnerSessionCount), and the one statement that inserts a session only
while the owner is under it — the first turn on a new key sends it with the
turn's own rows (turns_app.services.claim)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from functools import cache

from django.conf import settings
from django.db import connection
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.functions import Now
from django.utils import timezone

from core import rows
from core.errors import TooManySessions
from sessions_app.models import AgentSession, OwnerSessionCount
from sessions_app.validation import default_form_for, stage_for

# The owner's live sessions as the database keeps count of them
# (OwnerSessionCount): one row read, however many sessions the owner has.
LIVE_SESSIONS = f'COALESCE((SELECT "live" FROM "{OwnerSessionCount._meta.db_table}" WHERE "owner" = %s), 0)'
SELECT_LIVE_SESSIONS = f"SELECT {LIVE_SESSIONS}"
UNDER_QUOTA = f"{LIVE_SESSIONS} < %s"


def too_many_sessions(limit: int) -> TooManySessions:
    return TooManySessions(
        f"at most {limit} live sessions per owner; delete some first",
        details={"limit": limit},
    )


def check_session_quota(*, owner: str) -> None:
    """Before a session is created or revived: at most
    AGENT_MAX_SESSIONS_PER_OWNER live sessions per owner, as counted by the
    database (OwnerSessionCount). Read inside the creating transaction; a
    create counts once it commits, so concurrent creates may overshoot by
    the number running at once, which bounds growth all the same."""
    limit = settings.AGENT_MAX_SESSIONS_PER_OWNER
    with connection.cursor() as cursor:
        cursor.execute(SELECT_LIVE_SESSIONS, [owner])
        (live,) = cursor.fetchone()
    if live >= limit:
        raise too_many_sessions(limit)


def new_session(*, owner: str, key: str, graph: str | None = None) -> AgentSession:
    """A session with this key (`graph` or AGENT_GRAPH, with its default
    form), not yet inserted: see `insert_under_quota`."""
    graph = graph or settings.AGENT_GRAPH
    return AgentSession(owner=owner, key=key, form=default_form_for(graph), graph=graph)


def revive(session: AgentSession, *, form: list, metadata: dict, graph: str) -> None:
    """A tombstone becomes a new session, in place (written by the caller).

    Kept, on purpose: the row's `id` (the owner's key has one row for
    good; `epoch`, moved by the delete, tells its sessions apart), the
    epoch, and the version, never reset and moved on by one here: the new
    session starts at a version no client has read, so an If-Match from
    before the delete cannot match it. New: `created_at` (this session's
    creation), its form, graph and metadata; the rest — fields, stage,
    transcript, turn count, head — the delete already cleared
    (docs/api.md, "Sessions")."""
    session.version += 1
    session.deleted_at = None
    session.created_at = timezone.now()
    session.form = form
    session.metadata = metadata
    session.graph = graph
    session.stage = stage_for(form, {})


REVIVED_FIELDS = ["version", "deleted_at", "created_at", "form", "metadata", "graph", "stage", "updated_at"]


@cache
def _lease_deadline(vendor: str, length: timedelta) -> rows.Statement:
    """A lease's deadline from the database's clock, as SQL for `vendor`."""
    return rows.expression(ExpressionWrapper(Now() + Value(length), output_field=DateTimeField()))


def insert_under_quota(session: AgentSession, *, holder: uuid.UUID | None = None) -> rows.Statement:
    """The statement inserting a `new_session`, only under the owner's
    quota, checked in the same statement. ON CONFLICT DO NOTHING: a
    concurrent first request may create it first, and its row is ours to
    lock then (no savepoint needed). `holder`: the turn that holds the new
    session's lease, its deadline computed from the database's clock in the
    same statement. Run it, then `inserted(session, <its first row>)`."""
    expressions = {}
    if holder is not None:
        session.active_turn_id = holder
        expressions["lease_expires_at"] = _lease_deadline(connection.vendor, AgentSession.lease_length())
    limit = settings.AGENT_MAX_SESSIONS_PER_OWNER
    return rows.insert_if_statement(
        session,
        UNDER_QUOTA,
        [session.owner, limit],
        ignore_conflicts=True,
        returning_clock=True,
        expressions=expressions,
    )


def inserted(session: AgentSession, returned: tuple | None) -> bool:
    """After `insert_under_quota` ran: True if it inserted the session,
    which is then as its row (`rows.inserted`), `created_here`. A row it
    inserted is not read back (docs/turn-protocol.md, "New session in one round
    trip")."""
    if not rows.inserted(session, returned):
        return False
    session.created_here = True
    if session.active_turn_id is not None:
        session.lease_expires_at = session.db_now + AgentSession.lease_length()
    return True
