"""Writes to sessions, and the names the apps above use for every write of
sessions_app. Every function that changes a session takes its row lock
itself (`session_lock`, sessions_app.locking), so the API, the SSE consumer
and the admin share one set of rules. Deleting a session also drops its
turns and checkpoints: turns_app does that on the `session_deleting` signal,
inside the delete's transaction.

The steps live by what they do; this module names them all:

    api_keys.py    create, authenticate, revoke API keys
    validation.py  a client's form, metadata and graph, checked; a stage
    creation.py    a new session under its owner's quota, in one statement
    locking.py     the row lock as a value (LockedSession) and the lease's
                   writes, which only a holder of the lock may make
    services.py    (here) create, fork's insert, revive, metadata,
                   set-fields, delete, expiry of idle sessions and tombstones
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, overload

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import InvalidFields, SessionBusy, SessionExists, SessionNotFound, ValidationFailed, VersionConflict
from graphs.intake import form_spec
from sessions_app.api_keys import API_KEY_PREFIX, api_key_authenticate, api_key_create, api_key_revoke, hash_api_key
from sessions_app.creation import REVIVED_FIELDS, check_session_quota, insert_under_quota, inserted, new_session, revive
from sessions_app.locking import LockedSession, session_as_claimed, session_create_locked, session_lock
from sessions_app.models import KEEP_LATEST, AgentSession
from sessions_app.selectors import (
    check_session_key,
    session_get_including_deleted,
    sessions_expired_by,
    sessions_idle_since,
    tombstones_older_than,
)
from sessions_app.signals import session_deleting
from sessions_app.validation import (
    METADATA_MAX_BYTES,
    check_form,
    check_graph,
    check_metadata,
    default_form,
    default_form_for,
    stage_for,
)

__all__ = [
    "API_KEY_PREFIX",
    "METADATA_MAX_BYTES",
    "FieldsUpdate",
    "LockedSession",
    "api_key_authenticate",
    "api_key_create",
    "api_key_revoke",
    "check_form",
    "check_graph",
    "check_metadata",
    "check_session_quota",
    "default_form",
    "default_form_for",
    "hash_api_key",
    "insert_under_quota",
    "inserted",
    "new_session",
    "revive_if_deleted",
    "session_as_claimed",
    "session_create",
    "session_create_locked",
    "session_delete",
    "session_delete_for_owner",
    "session_insert",
    "session_lock",
    "session_merge_metadata",
    "session_set_fields",
    "sessions_expire_idle",
    "sessions_expire_ttl",
    "stage_for",
    "tombstones_remove",
]


def revive_if_deleted(locked: LockedSession) -> None:
    """A tombstone comes back to life: its
    epoch was already advanced by the delete, and it kept nothing of the
    old session, its form included, so the new epoch runs the default graph
    with the default form."""
    session = locked.session
    if not session.is_deleted:
        return
    check_session_quota(owner=session.owner)
    revive(session, form=default_form_for(settings.AGENT_GRAPH), metadata={}, graph=settings.AGENT_GRAPH)
    session.save(update_fields=REVIVED_FIELDS)


def session_create(
    *,
    owner: str,
    key: str | None = None,
    form: Any = None,
    metadata: Any = None,
    graph: Any = None,
    ttl_minutes: float | None = None,
    ttl_strategy: str | None = None,
) -> AgentSession:
    """A new session (or a new epoch of a deleted one) running `graph`
    (default AGENT_GRAPH) for its whole epoch; with `ttl_minutes`, deleted
    by maintenance that many minutes from now (`sessions_expire_ttl`), or
    with `ttl_strategy` keep_latest pruned then (turns_app's maintenance)."""
    with transaction.atomic(durable=True):
        session = session_insert(owner=owner, key=key, form=form, metadata=metadata, graph=graph)
        if ttl_minutes is not None:
            _set_ttl(session, ttl_minutes, ttl_strategy)
            session.save(update_fields=TTL_FIELDS)
        return session


TTL_FIELDS = ["ttl_minutes", "expires_at", "ttl_strategy", "updated_at"]


def _set_ttl(session: AgentSession, minutes: float, strategy: str | None = None) -> None:
    session.ttl_minutes = minutes
    session.expires_at = timezone.now() + timedelta(minutes=minutes)
    session.ttl_strategy = KEEP_LATEST if strategy == KEEP_LATEST else None


def session_insert(
    *, owner: str, key: str | None = None, form: Any = None, metadata: Any = None, graph: Any = None
) -> AgentSession:
    """session_create inside the caller's transaction, for services that
    must create a session and more in one commit (a fork and its turns)."""
    key = check_session_key(key) if key is not None else uuid.uuid4().hex
    clean_graph = check_graph(graph)
    clean_form = check_form(form, clean_graph) if form is not None else default_form_for(clean_graph)
    clean_metadata = check_metadata(metadata)
    existing = AgentSession.objects.select_for_update().filter(owner=owner, key=key).first()
    if existing is not None and not existing.is_deleted:
        raise SessionExists()
    check_session_quota(owner=owner)
    if existing is not None:
        revive(existing, form=clean_form, metadata=clean_metadata, graph=clean_graph)
        existing.save(update_fields=REVIVED_FIELDS)
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


def session_merge_metadata(
    *, owner: str, key: str, metadata: Any, ttl_minutes: float | None = None, ttl_strategy: str | None = None
) -> AgentSession:
    """Merge `metadata` into the session's (a key set to null stays, as
    null): the Agent Protocol's thread update, and its run creation stamping
    the thread with the graph it runs. The merged result is bounded as a
    new session's metadata is. `ttl_minutes` sets the TTL again, counted
    from now."""
    changes = check_metadata(metadata)
    with transaction.atomic(durable=True):
        session = session_lock(owner=owner, key=key).session
        merged = check_metadata({**session.metadata, **changes})
        update = []
        if merged != session.metadata:
            session.metadata = merged
            update = ["metadata", "updated_at"]
        if ttl_minutes is not None:
            _set_ttl(session, ttl_minutes, ttl_strategy)
            update = [*update, *TTL_FIELDS]
        if update:
            session.save(update_fields=sorted(set(update)))
        return session


@dataclass(frozen=True)
class FieldsUpdate:
    session: AgentSession
    changes: dict[str, Any]


def session_set_fields(*, owner: str, key: str, values: Any, expected_version: int) -> FieldsUpdate:
    """Version-conditional: applies only if the session is at `expected_version`
    and no turn holds it; a live turn answers `session_busy` (the caller may
    wait and retry). Bumps the version, which fences off any turn that based
    itself on the old one."""
    if not isinstance(values, dict) or not values:
        raise ValidationFailed("fields must be a non-empty JSON object")
    with transaction.atomic(durable=True):
        session = session_lock(owner=owner, key=key).session
        if session.version != expected_version:
            raise VersionConflict(
                f"the session is at version {session.version}, not {expected_version}",
                details={"version": session.version},
            )
        if session.has_live_turn(session.db_now):
            raise SessionBusy()
        try:
            clean = form_spec.validate_fields(form_spec.stored_form(session.form), values)
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


@overload
def session_delete(*, session_id: uuid.UUID, idle_before: None = None, expired_by: None = None) -> AgentSession: ...
@overload
def session_delete(
    *, session_id: uuid.UUID, idle_before: datetime | None = None, expired_by: datetime | None = None
) -> AgentSession | None: ...
def session_delete(
    *, session_id: uuid.UUID, idle_before: datetime | None = None, expired_by: datetime | None = None
) -> AgentSession | None:
    """Delete a session, keeping a tombstone: epoch + 1 (fences any running
    turn), version kept, the conversation's columns cleared. Receivers of
    `session_deleting` (turns_app: turns and checkpoint threads) purge in the
    same transaction, so the purge and the tombstone commit together or not
    at all. Deleting a tombstone succeeds and purges what a late run wrote.

    `idle_before` (the idle-session expiry): delete only a live session last
    written before then, checked under the lock, so a session used since it
    was picked is kept; returns None when it is kept. `expired_by` (the
    thread TTL): delete only a live session whose TTL ran out by then and
    that no turn holds, checked under the lock, so a TTL set again since it
    was picked, or a run in progress, keeps it (for a later pass)."""
    with transaction.atomic(durable=True):
        locked = session_lock(session_id=session_id, include_deleted=True)
        session = locked.session
        if idle_before is not None and (session.is_deleted or session.updated_at >= idle_before):
            return None
        if expired_by is not None and (
            session.is_deleted
            or session.ttl_strategy is not None
            or session.expires_at is None
            or session.expires_at > expired_by
            or session.has_live_turn(locked.now)
        ):
            return None
        session_deleting.send(sender=AgentSession, locked=locked)
        locked.tombstone()
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


def sessions_expire_ttl(*, limit: int) -> int:
    """Delete (through `session_delete`: tombstone and purge) up to `limit`
    live sessions whose thread TTL ran out. Returns how many."""
    now = timezone.now()
    expired = 0
    for session_id in sessions_expired_by(now, limit=limit):
        if session_delete(session_id=session_id, expired_by=now) is not None:
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
                locked = session_lock(session_id=session_id, include_deleted=True)
            except SessionNotFound:
                continue
            session = locked.session
            if session.deleted_at is None or session.deleted_at >= cutoff:
                continue  # revived since it was picked
            session_deleting.send(sender=AgentSession, locked=locked)
            session.delete()
            removed += 1
    return removed


def session_delete_for_owner(*, owner: str, key: str) -> AgentSession:
    """Delete by key for the API; a tombstone deletes again, an unknown key is 404."""
    session = session_get_including_deleted(owner=owner, key=key)
    return session_delete(session_id=session.id)
