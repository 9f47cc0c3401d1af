"""Reads of sessions and API keys. Raise `SessionNotFound` rather than let a
missing row surface as a 500."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db.models import Q, QuerySet
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Now

from core import metadata_filter
from core.errors import InvalidSessionKey, SessionNotFound

# AgentSession is also the type of what these reads return: the apps above
# name it from here, never from sessions_app.models.
from sessions_app.models import KEEP_LATEST, SESSION_KEY_PATTERN, AgentSession

_SESSION_KEY = re.compile(SESSION_KEY_PATTERN)


def check_session_key(key: str) -> str:
    if not isinstance(key, str) or not _SESSION_KEY.fullmatch(key):
        raise InvalidSessionKey()
    return key


def session_get(*, owner: str, key: str, where: Mapping[str, Any] | None = None) -> AgentSession:
    """A live session of this owner (whose metadata matches `where`, an auth
    handler's filter). Tombstones, other owners' sessions and unmatched
    ones answer the same 404, so a key's existence does not leak."""
    check_session_key(key)
    try:
        return metadata_filter.apply(AgentSession.objects, where).get(owner=owner, key=key, deleted_at__isnull=True)
    except AgentSession.DoesNotExist:
        raise SessionNotFound() from None


def session_matches(*, owner: str, key: str, where: Mapping[str, Any]) -> bool:
    """Whether the owner's live session `key` matches the filter, asked of the database."""
    check_session_key(key)
    live = AgentSession.objects.filter(owner=owner, key=key, deleted_at__isnull=True)
    return metadata_filter.apply(live, where).exists()


def session_keys_matching(*, owner: str, keys: list[str], where: Mapping[str, Any] | None) -> set[str]:
    """Which of `keys` name live sessions of the owner matching the filter."""
    live = AgentSession.objects.filter(owner=owner, key__in=keys, deleted_at__isnull=True)
    return set(metadata_filter.apply(live, where).values_list("key", flat=True))


def session_list(*, owner: str) -> QuerySet[AgentSession]:
    return AgentSession.objects.filter(owner=owner, deleted_at__isnull=True).order_by("-updated_at", "key")


# What a list shows of each session; the rest (form, fields, metadata, the
# transcript) can be tens of kilobytes a row: `GET /sessions/{key}` has it.
SESSION_SUMMARY_COLUMNS = (
    "id",
    "key",
    "stage",
    "version",
    "epoch",
    "turn_count",
    "created_at",
    "updated_at",
)


def session_page(*, owner: str, limit: int, offset: int) -> tuple[list[AgentSession], int]:
    sessions = session_list(owner=owner)
    page = sessions.only(*SESSION_SUMMARY_COLUMNS)[offset : offset + limit]
    return list(page), sessions.count()


SEARCH_ORDER = {"key": "key", "created_at": "created_at", "updated_at": "updated_at"}
SEARCH_STATES = frozenset({"busy", "interrupted", "idle"})


def session_search(
    *,
    owner: str,
    metadata: dict[str, Any] | None = None,
    keys: list[str] | None = None,
    state: str | None = None,
    where: Mapping[str, Any] | None = None,
    order_by: str = "created_at",
    descending: bool = True,
    limit: int,
    offset: int,
) -> tuple[list[AgentSession], int]:
    """The owner's live sessions matching every filter, and how many match:
    `metadata` — each top-level key equal (a JSON value, compared as JSON);
    `state` — "busy" (a turn holds it), "interrupted" (its graph waits for a
    resume) or "idle" (neither); `where` — an auth handler's filter, in the
    query, so the page and the count are of what the caller may see."""
    sessions = metadata_filter.apply(AgentSession.objects.filter(owner=owner, deleted_at__isnull=True), where)
    for i, (name, value) in enumerate((metadata or {}).items()):
        # A key transform, not `contains` (SQLite has no JSON containment),
        # and not `metadata__<name>`: a name may hold "__".
        sessions = sessions.alias(**{f"_meta{i}": KeyTransform(name, "metadata")}).filter(**{f"_meta{i}": value})
    if keys is not None:
        sessions = sessions.filter(key__in=keys)
    busy = Q(active_turn_id__isnull=False, lease_expires_at__gt=Now())
    if state == "busy":
        sessions = sessions.filter(busy)
    elif state == "interrupted":
        sessions = sessions.filter(interrupt__isnull=False).exclude(busy)
    elif state == "idle":
        sessions = sessions.filter(interrupt__isnull=True).exclude(busy)
    order = f"-{SEARCH_ORDER[order_by]}" if descending else SEARCH_ORDER[order_by]
    sessions = sessions.order_by(order, "key")
    return list(sessions[offset : offset + limit]), sessions.count()


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
        AgentSession.objects.filter(active_turn_id__isnull=False, lease_expires_at__lt=Now()).values_list(
            "id", flat=True
        )
    )


def pending_interrupt_threads() -> list[str]:
    """Checkpoint threads of the interrupts sessions are waiting on."""
    return [
        interrupt["thread_id"]
        for interrupt in AgentSession.objects.filter(interrupt__isnull=False).values_list("interrupt", flat=True)
        if interrupt and interrupt.get("thread_id")
    ]


def sessions_idle_since(cutoff, *, limit: int) -> list:
    """Ids of live sessions last written before `cutoff`, oldest first."""
    return list(
        AgentSession.objects.filter(deleted_at__isnull=True, updated_at__lt=cutoff)
        .order_by("updated_at")
        .values_list("id", flat=True)[:limit]
    )


def sessions_expired_by(moment, *, limit: int, keep_latest: bool = False) -> list:
    """Ids of live sessions whose thread TTL ran out by `moment`, the
    longest expired first: those of strategy delete, or `keep_latest`."""
    strategy = Q(ttl_strategy=KEEP_LATEST) if keep_latest else Q(ttl_strategy__isnull=True)
    return list(
        AgentSession.objects.filter(strategy, deleted_at__isnull=True, expires_at__lte=moment)
        .order_by("expires_at")
        .values_list("id", flat=True)[:limit]
    )


def tombstones_older_than(cutoff, *, limit: int) -> list:
    """Ids of sessions deleted before `cutoff`, oldest first."""
    return list(
        AgentSession.objects.filter(deleted_at__lt=cutoff).order_by("deleted_at").values_list("id", flat=True)[:limit]
    )
