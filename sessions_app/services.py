"""Writes to sessions and API keys. Every function that changes a session
takes its row lock itself (`SELECT … FOR UPDATE`, an IMMEDIATE transaction on
SQLite), so the API, the SSE consumer and the admin share one set of rules.
Deleting a session also drops its turns and checkpoints: turns_app does that
on the `session_deleting` signal, inside the delete's transaction."""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.functions import Now
from django.utils import timezone

from core import rows
from graphs.intake import form_spec
from core.errors import (
    InvalidFields,
    InvalidForm,
    SessionBusy,
    SessionExists,
    SessionNotFound,
    TooManySessions,
    Unauthorized,
    UnknownGraph,
    ValidationFailed,
    VersionConflict,
)
from sessions_app import key_cache
from sessions_app.models import AgentSession, ApiKey
from sessions_app.selectors import (
    check_session_key,
    session_get_including_deleted,
    sessions_idle_since,
    tombstones_older_than,
)
from sessions_app.signals import session_deleting

API_KEY_PREFIX = "ask_"
METADATA_MAX_BYTES = 16_384

# --- API keys ------------------------------------------------------------------------


def hash_api_key(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_key_create(*, owner: str) -> tuple[ApiKey, str]:
    """Returns the row and the raw key; the raw key is not stored anywhere."""
    owner = (owner or "").strip()
    if not owner or len(owner) > 150:
        raise ValidationFailed("the owner name must be 1-150 characters")
    prefix = secrets.token_hex(4)
    raw = f"{API_KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(owner=owner, prefix=prefix, key_hash=hash_api_key(raw))
    return key, raw


def api_key_authenticate(*, raw: str) -> ApiKey:
    if not raw or len(raw) > 200:
        raise Unauthorized()
    try:
        key = ApiKey.objects.get(key_hash=hash_api_key(raw), revoked_at__isnull=True)
    except ApiKey.DoesNotExist:
        raise Unauthorized() from None
    now = timezone.now()
    # One write a minute at most: last_used_at is for operators, not a hot path.
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    key_cache.forget(api_key.key_hash)
    return api_key


# --- sessions ---------------------------------------------------------------------------


def default_form() -> list[dict[str, Any]]:
    return form_spec.form_to_json(form_spec.DEFAULT_FORM)


def check_form(raw: Any) -> list[dict[str, Any]]:
    try:
        form_spec.check_form_size(raw)
        return form_spec.form_to_json(form_spec.parse_form(raw))
    except form_spec.FormSpecError as exc:
        raise InvalidForm(str(exc)) from None


def check_metadata(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValidationFailed("metadata must be a JSON object")
    if len(json.dumps(raw)) > METADATA_MAX_BYTES:
        raise ValidationFailed(f"metadata must be at most {METADATA_MAX_BYTES} bytes of JSON")
    return raw


def stage_for(form: list[dict[str, Any]], fields: dict[str, Any]) -> str:
    """A form-filling session's stage: complete once every required field is."""
    missing = form_spec.missing_required(form_spec.parse_form(form), fields) if form else []
    return "collecting" if missing else "complete"


def check_graph(raw: Any) -> str:
    if raw is None:
        return settings.AGENT_GRAPH
    if not isinstance(raw, str) or raw not in settings.AGENT_GRAPHS:
        raise UnknownGraph(f"no graph named {raw!r} is registered; GET /api/graphs lists them")
    return raw


_LOCK_BY_ID = rows.LockedRead(AgentSession, equal=["id"])
_LOCK_LIVE_BY_ID = rows.LockedRead(AgentSession, equal=["id"], null=["deleted_at"])
_LOCK_BY_KEY = rows.LockedRead(AgentSession, equal=["owner", "key"])
_LOCK_LIVE_BY_KEY = rows.LockedRead(AgentSession, equal=["owner", "key"], null=["deleted_at"])


def session_lock(
    *,
    owner: str | None = None,
    key: str | None = None,
    session_id: uuid.UUID | None = None,
    include_deleted: bool = False,
) -> AgentSession:
    """Call inside `transaction.atomic`; takes `SELECT … FOR UPDATE` on the
    session row (by owner and key, or by id) and reads the database's clock
    with it into `session.db_now`, for lease decisions. One statement,
    written once (core.rows), as every turn takes it twice.

    Lock order, for every writer: the session row first, then its turns.
    Nothing locks a turn and then its session, so two writers never wait on
    each other in opposite order. Whatever else a step reads, it reads in
    later statements: on PostgreSQL, a `FOR UPDATE` that waited for the lock
    re-reads the locked row, but anything else in the same statement keeps
    the snapshot from before the wait and would miss what the holder just
    committed."""
    if session_id is not None:
        query = _LOCK_BY_ID if include_deleted else _LOCK_LIVE_BY_ID
        session = query.one(id=session_id)
    else:
        query = _LOCK_BY_KEY if include_deleted else _LOCK_LIVE_BY_KEY
        session = query.one(owner=owner, key=key)
    if session is None:
        raise SessionNotFound()
    return session


# The owner's live sessions as the database keeps count of them
# (OwnerSessionCount): one row read, however many sessions the owner has.
_LIVE_SESSIONS = 'COALESCE((SELECT "live" FROM "agent_owner_sessions" WHERE "owner" = %s), 0)'


def _too_many_sessions(limit: int) -> TooManySessions:
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
        cursor.execute(f"SELECT {_LIVE_SESSIONS}", [owner])
        (live,) = cursor.fetchone()
    if live >= limit:
        raise _too_many_sessions(limit)


def new_session(*, owner: str, key: str, graph: str | None = None) -> AgentSession:
    """A session with this key (default form, `graph` or AGENT_GRAPH), not
    yet inserted: see `insert_under_quota`."""
    return AgentSession(owner=owner, key=key, form=default_form(), graph=graph or settings.AGENT_GRAPH)


@lru_cache(maxsize=None)
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
        f"{_LIVE_SESSIONS} < %s",
        [session.owner, limit],
        ignore_conflicts=True,
        returning_clock=True,
        expressions=expressions,
    )


def inserted(session: AgentSession, returned: tuple | None) -> bool:
    """After `insert_under_quota` ran: True if it inserted the session,
    which is then as its row (`rows.inserted`), `created_here`. A row it
    inserted is not read back (issue 12)."""
    if not rows.inserted(session, returned):
        return False
    session.created_here = True
    if session.active_turn_id is not None:
        session.lease_expires_at = session.db_now + AgentSession.lease_length()
    return True


def session_as_claimed(*, session_id: uuid.UUID, epoch: int, version: int) -> AgentSession:
    """The session row as a turn claimed it, not read: for a write fenced on
    those values in its own statement (`rows.update_if_statement`)."""
    session = AgentSession(id=session_id, epoch=epoch, version=version)
    session._state.adding = False
    return session


def session_create_locked(*, owner: str, key: str) -> AgentSession:
    """Call inside `transaction.atomic`, after `session_lock` found no session
    with this key: creates it (default form, AGENT_GRAPH), or locks the one a
    concurrent request created first. `created_here` on the result is True
    when this call inserted the row: it has no turns to look for."""
    session = new_session(owner=owner, key=key)
    if inserted(session, rows.first_row([insert_under_quota(session)])):
        return session
    try:
        return session_lock(owner=owner, key=key, include_deleted=True)
    except SessionNotFound:
        raise _too_many_sessions(settings.AGENT_MAX_SESSIONS_PER_OWNER) from None


def revive_if_deleted(session: AgentSession) -> None:
    """Call with the session locked. A tombstone comes back to life: its
    epoch was already advanced by the delete, and it kept nothing of the
    old session, its form included, so the new epoch runs the default graph
    with the default form."""
    if not session.is_deleted:
        return
    check_session_quota(owner=session.owner)
    session.deleted_at = None
    session.graph = settings.AGENT_GRAPH
    session.form = default_form()
    session.stage = stage_for(session.form, {})
    session.save(update_fields=["deleted_at", "graph", "form", "stage", "updated_at"])


def session_create(
    *, owner: str, key: str | None = None, form: Any = None, metadata: Any = None, graph: Any = None
) -> AgentSession:
    """A new session (or a new epoch of a deleted one) running `graph`
    (default AGENT_GRAPH) for its whole epoch."""
    with transaction.atomic(durable=True):
        return session_insert(owner=owner, key=key, form=form, metadata=metadata, graph=graph)


def session_insert(
    *, owner: str, key: str | None = None, form: Any = None, metadata: Any = None, graph: Any = None
) -> AgentSession:
    """session_create inside the caller's transaction, for services that
    must create a session and more in one commit (a fork and its turns)."""
    key = check_session_key(key) if key is not None else uuid.uuid4().hex
    clean_form = check_form(form) if form is not None else default_form()
    clean_metadata = check_metadata(metadata)
    clean_graph = check_graph(graph)
    existing = (
        AgentSession.objects.select_for_update().filter(owner=owner, key=key).first()
    )
    if existing is not None and not existing.is_deleted:
        raise SessionExists()
    check_session_quota(owner=owner)
    if existing is not None:
        existing.form = clean_form
        existing.metadata = clean_metadata
        existing.graph = clean_graph
        existing.stage = stage_for(clean_form, {})
        existing.deleted_at = None
        existing.save()
        return existing
    try:
        with transaction.atomic():
            return AgentSession.objects.create(
                owner=owner,
                key=key,
                form=clean_form,
                metadata=clean_metadata,
                graph=clean_graph,
                stage=stage_for(clean_form, {}),
            )
    except IntegrityError:
        raise SessionExists() from None


def session_merge_metadata(*, owner: str, key: str, metadata: Any) -> AgentSession:
    """Merge `metadata` into the session's (a key set to null stays, as
    null): the Agent Protocol's thread update, and its run creation stamping
    the thread with the graph it runs. The merged result is bounded as a
    new session's metadata is."""
    changes = check_metadata(metadata)
    with transaction.atomic(durable=True):
        session = session_lock(owner=owner, key=key)
        merged = check_metadata({**session.metadata, **changes})
        if merged != session.metadata:
            session.metadata = merged
            session.save(update_fields=["metadata", "updated_at"])
        return session


@dataclass(frozen=True)
class FieldsUpdate:
    session: AgentSession
    changes: dict[str, Any]


def session_set_fields(
    *, owner: str, key: str, values: Any, expected_version: int
) -> FieldsUpdate:
    """Version-conditional: applies only if the session is at `expected_version`
    and no turn holds it; a live turn answers `session_busy` (the caller may
    wait and retry). Bumps the version, which fences off any turn that based
    itself on the old one."""
    if not isinstance(values, dict) or not values:
        raise ValidationFailed("fields must be a non-empty JSON object")
    with transaction.atomic(durable=True):
        session = session_lock(owner=owner, key=key)
        if session.version != expected_version:
            raise VersionConflict(
                f"the session is at version {session.version}, not {expected_version}",
                details={"version": session.version},
            )
        if session.has_live_turn(session.db_now):
            raise SessionBusy()
        try:
            clean = form_spec.validate_fields(form_spec.parse_form(session.form), values)
        except form_spec.FieldsInvalid as exc:
            raise InvalidFields(details=exc.errors) from None
        changes = {k: v for k, v in clean.items() if session.fields.get(k) != v}
        fields = {**session.fields, **clean}
        fields = {k: v for k, v in fields.items() if v is not None}
        session.fields = fields
        session.stage = stage_for(session.form, fields)
        session.version += 1
        session.save(update_fields=["fields", "stage", "version", "updated_at"])
        return FieldsUpdate(session=session, changes=changes)


def session_delete(
    *, session_id: uuid.UUID, idle_before: datetime | None = None
) -> AgentSession | None:
    """Delete a session, keeping a tombstone: epoch + 1 (fences any running
    turn), version kept, the conversation's columns cleared. Receivers of
    `session_deleting` (turns_app: turns and checkpoint threads) purge in the
    same transaction, so the purge and the tombstone commit together or not
    at all. Deleting a tombstone succeeds and purges what a late run wrote.

    `idle_before` (the idle-session expiry): delete only a live session last
    written before then, checked under the lock, so a session used since it
    was picked is kept; returns None when it is kept."""
    with transaction.atomic(durable=True):
        session = session_lock(session_id=session_id, include_deleted=True)
        if idle_before is not None and (session.is_deleted or session.updated_at >= idle_before):
            return None
        session_deleting.send(sender=AgentSession, session=session)
        session.tombstone(session.db_now)
        return session


def sessions_expire_idle(*, days: float, limit: int) -> int:
    """Delete (through `session_delete`: tombstone and purge) up to `limit`
    live sessions nobody wrote to for `days`. Returns how many."""
    cutoff = timezone.now() - timedelta(days=days)
    expired = 0
    for session_id in sessions_idle_since(cutoff, limit=limit):
        if session_delete(session_id=session_id, idle_before=cutoff) is not None:
            expired += 1
    return expired


def tombstones_remove(*, days: float, limit: int) -> int:
    """Remove up to `limit` tombstones deleted more than `days` ago, row and
    all: after that the key is unknown (a DELETE answers 404) and a new
    session with it starts at epoch 1, version 0. `session_deleting` runs
    first, in the same transaction, so a late run's leftovers go too.
    Returns how many."""
    cutoff = timezone.now() - timedelta(days=days)
    removed = 0
    for session_id in tombstones_older_than(cutoff, limit=limit):
        with transaction.atomic(durable=True):
            try:
                session = session_lock(session_id=session_id, include_deleted=True)
            except SessionNotFound:
                continue
            if not session.is_deleted or session.deleted_at >= cutoff:
                continue  # revived since it was picked
            session_deleting.send(sender=AgentSession, session=session)
            session.delete()
            removed += 1
    return removed


def session_delete_for_owner(*, owner: str, key: str) -> AgentSession:
    """Delete by key for the API; a tombstone deletes again, an unknown key is 404."""
    session = session_get_including_deleted(owner=owner, key=key)
    return session_delete(session_id=session.id)
