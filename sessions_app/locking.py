"""The session row's lock, as a value: `session_lock` takes `SELECT … FOR
UPDATE` on the row (an IMMEDIATE transaction on SQLite) inside the caller's
`transaction.atomic` and hands back a `LockedSession`, the only way to get
one. A step that must run under the lock takes a `LockedSession`, so
calling it unlocked does not type-check, and the lease's writes (`hold`,
`release`, `tombstone`) are methods of the lock, not of the row
(docs/turn-protocol.md, "Fencing" and "Leases").

Lock order, for every writer: the session row first, then its turns.
Nothing locks a turn and then its session, so two writers never wait on
each other in opposite order. Whatever else a step reads, it reads in later
statements: on PostgreSQL, a `FOR UPDATE` that waited for the lock re-reads
the locked row, but anything else in the same statement keeps the snapshot
from before the wait and would miss what the holder just committed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection

from core import rows
from core.errors import SessionNotFound
from sessions_app.creation import insert_under_quota, inserted, new_session, too_many_sessions
from sessions_app.models import AgentSession

# Held by this module alone: a LockedSession made anywhere else is refused.
_ISSUED_BY_THE_LOCK = object()


@dataclass(frozen=True, eq=False)
class LockedSession:
    """The session row, locked by the transaction that is open now. Made by
    `session_lock` (and `session_create_locked`) only; good until that
    transaction ends. `session` is the row as read with the lock, with
    `db_now`, the database's clock at that moment, for lease decisions."""

    session: AgentSession
    _issuer: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._issuer is not _ISSUED_BY_THE_LOCK:
            raise TypeError("a LockedSession comes from sessions_app.locking.session_lock, nowhere else")
        if not connection.in_atomic_block:
            raise RuntimeError("a LockedSession exists only inside the transaction that took the lock")

    @property
    def now(self) -> datetime:
        """The database's clock, read with the lock."""
        return self.session.db_now

    def hold(self, turn_id: uuid.UUID) -> None:
        """Give (or extend) the lease to `turn_id`, written now."""
        self.session.lease_to(turn_id, self.now)
        rows.update(self.session, AgentSession.LEASE_FIELDS)

    def release(self) -> None:
        """Free the session, written now."""
        self.session.active_turn_id = None
        self.session.lease_expires_at = None
        rows.update(self.session, AgentSession.LEASE_FIELDS)

    def tombstone(self) -> None:
        """What a delete leaves: epoch + 1 (fences any running turn), the
        version kept (a client's If-Match from before cannot match after),
        and nothing a client supplied: form, fields, metadata and the
        conversation are cleared (a revived key starts from the default
        form). A tombstone stays a tombstone of the same epoch."""
        session = self.session
        if not session.is_deleted:
            session.epoch += 1
            session.deleted_at = self.now
        session.form = []
        session.metadata = {}
        session.fields = {}
        session.stage = session.DEFAULT_STAGE
        session.turn_count = 0
        session.head_turn_id = None
        session.interrupt = None
        session.active_turn_id = None
        session.lease_expires_at = None
        session.ttl_minutes = None
        session.expires_at = None
        session.ttl_strategy = None
        session.pruned_before = None
        session.save()


# Written once each (core.rows): every turn takes the lock twice.
_LOCK_BY_ID = rows.LockedRead(AgentSession, equal=["id"])
_LOCK_LIVE_BY_ID = rows.LockedRead(AgentSession, equal=["id"], null=["deleted_at"])
_LOCK_BY_KEY = rows.LockedRead(AgentSession, equal=["owner", "key"])
_LOCK_LIVE_BY_KEY = rows.LockedRead(AgentSession, equal=["owner", "key"], null=["deleted_at"])


def _check_in_transaction() -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("session_lock: call inside transaction.atomic (the lock lasts until it ends)")


def session_lock(
    *,
    owner: str | None = None,
    key: str | None = None,
    session_id: uuid.UUID | None = None,
    include_deleted: bool = False,
) -> LockedSession:
    """Call inside `transaction.atomic`; takes `SELECT … FOR UPDATE` on the
    session row (by owner and key, or by id) and reads the database's clock
    with it, in one statement. `SessionNotFound` when there is no such row
    (or only a tombstone, unless `include_deleted`)."""
    _check_in_transaction()
    if session_id is not None:
        query = _LOCK_BY_ID if include_deleted else _LOCK_LIVE_BY_ID
        session = query.one(id=session_id)
    else:
        query = _LOCK_BY_KEY if include_deleted else _LOCK_LIVE_BY_KEY
        session = query.one(owner=owner, key=key)
    if session is None:
        raise SessionNotFound()
    return LockedSession(session, _ISSUED_BY_THE_LOCK)


def session_create_locked(*, owner: str, key: str) -> LockedSession:
    """Call inside `transaction.atomic`, after `session_lock` found no session
    with this key: creates it (default form, AGENT_GRAPH) — a row this
    transaction inserted is as good as locked until it commits — or locks
    the one a concurrent request created first. `created_here` on the
    session is True when this call inserted the row: it has no turns to
    look for."""
    _check_in_transaction()
    session = new_session(owner=owner, key=key)
    if inserted(session, rows.first_row([insert_under_quota(session)])):
        return LockedSession(session, _ISSUED_BY_THE_LOCK)
    try:
        return session_lock(owner=owner, key=key, include_deleted=True)
    except SessionNotFound:
        raise too_many_sessions(settings.AGENT_MAX_SESSIONS_PER_OWNER) from None


def session_as_claimed(*, session_id: uuid.UUID, epoch: int, version: int) -> AgentSession:
    """The session row as a turn claimed it, neither read nor locked: for a
    write fenced on those values in its own statement
    (`rows.update_if_statement`), the lock's one-statement alternative
    (docs/turn-protocol.md, "One-statement commit")."""
    session = AgentSession(id=session_id, epoch=epoch, version=version)
    session._state.adding = False
    return session
