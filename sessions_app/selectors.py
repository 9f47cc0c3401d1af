"""Reads of sessions and API keys. Raise `SessionNotFound` rather than let a
missing row surface as a 500."""

from __future__ import annotations

import re

from django.db.models import QuerySet
from django.db.models.functions import Now

from agentsite.errors import InvalidSessionKey, SessionNotFound
from sessions_app.models import SESSION_KEY_PATTERN, AgentSession

_SESSION_KEY = re.compile(SESSION_KEY_PATTERN)


def check_session_key(key: str) -> str:
    if not isinstance(key, str) or not _SESSION_KEY.fullmatch(key):
        raise InvalidSessionKey()
    return key


def session_get(*, owner: str, key: str) -> AgentSession:
    """A live session of this owner. Tombstones and other owners' sessions
    answer the same 404, so a key's existence does not leak."""
    check_session_key(key)
    try:
        return AgentSession.objects.get(owner=owner, key=key, deleted_at__isnull=True)
    except AgentSession.DoesNotExist:
        raise SessionNotFound() from None


def session_list(*, owner: str) -> QuerySet[AgentSession]:
    return AgentSession.objects.filter(owner=owner, deleted_at__isnull=True).order_by(
        "-updated_at", "key"
    )


# What a list shows of each session; the rest (form, fields, metadata, the
# transcript) can be tens of kilobytes a row: `GET /sessions/{key}` has it.
SESSION_SUMMARY_COLUMNS = (
    "id", "key", "stage", "version", "epoch", "turn_count", "created_at", "updated_at",
)


def session_page(*, owner: str, limit: int, offset: int) -> tuple[list[AgentSession], int]:
    sessions = session_list(owner=owner)
    page = sessions.only(*SESSION_SUMMARY_COLUMNS)[offset : offset + limit]
    return list(page), sessions.count()


def session_get_including_deleted(*, owner: str, key: str) -> AgentSession:
    """For delete, which must succeed again on a tombstone."""
    check_session_key(key)
    try:
        return AgentSession.objects.get(owner=owner, key=key)
    except AgentSession.DoesNotExist:
        raise SessionNotFound() from None


def sessions_with_expired_lease() -> list:
    """Ids of sessions held by a turn whose lease ran out (by the database's clock)."""
    return list(
        AgentSession.objects.filter(active_turn_id__isnull=False, lease_expires_at__lt=Now())
        .values_list("id", flat=True)
    )


def pending_interrupt_threads() -> list[str]:
    """Checkpoint threads of the interrupts sessions are waiting on."""
    return [
        interrupt["thread_id"]
        for interrupt in AgentSession.objects.filter(interrupt__isnull=False).values_list("interrupt", flat=True)
        if interrupt and interrupt.get("thread_id")
    ]
