"""Business state of a conversation: the session row and the API keys that own
sessions. The turn protocol (turns_app) is the only writer of the session's
conversation columns; see docs/storage.md."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q

# Not "." or "..": path segments that browsers and most HTTP clients resolve
# away, so such a session could never be addressed by its URL.
SESSION_KEY_PATTERN = r"^(?!\.\.?$)[A-Za-z0-9._:-]{1,255}$"
# The thread TTL strategy that prunes instead of deleting (`ttl_strategy`).
KEEP_LATEST = "keep_latest"


class ApiKey(models.Model):
    """A bearer key. Only the SHA-256 of the key is stored: keys are 32 random
    bytes, so a fast hash is enough and lookups stay a single index probe."""

    owner = models.CharField(max_length=150, db_index=True)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agent_api_keys"
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.owner})"


class OwnerSessionCount(models.Model):
    """How many live (not deleted) sessions an owner has, kept by the
    database itself: triggers on agent_sessions count every insert, delete
    and change of `deleted_at` or `owner` (migration 0005), so no writer can
    forget to. The quota check reads this one row instead of counting the
    owner's sessions, which cost a new session time in proportion to the
    owner's sessions (docs/scale.md). A derived table: never written by the app,
    not moved by `move_sessions` (the target's triggers count what moves)."""

    owner = models.CharField(max_length=150, primary_key=True)
    live = models.BigIntegerField(default=0)

    class Meta:
        db_table = "agent_owner_sessions"

    def __str__(self) -> str:
        return f"{self.owner}: {self.live} live session(s)"


def default_graph() -> str:
    return settings.AGENT_GRAPH


class AgentSession(models.Model):
    # The stage a session without a graph-defined one is in.
    DEFAULT_STAGE = "collecting"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.CharField(max_length=150)
    key = models.CharField(max_length=255)
    # The registered graph (AGENT_GRAPHS) its turns run; fixed for an epoch.
    graph = models.CharField(max_length=64, default=default_graph)
    form = models.JSONField(default=list)
    fields = models.JSONField(default=dict)
    stage = models.CharField(max_length=64, default=DEFAULT_STAGE)
    metadata = models.JSONField(default=dict, blank=True)
    # Never reset, not even by delete: a client's If-Match can't match a
    # version from before a delete.
    version = models.BigIntegerField(default=0)
    epoch = models.BigIntegerField(default=1)
    turn_count = models.IntegerField(default=0)
    # The committed turn whose state is the session's (a turn's conversation
    # is the chain of turns up to it, `agent_turns.parent`); None before the
    # first turn, or after a rewind to the start. Plain UUIDs, not foreign
    # keys: sessions and turns would otherwise reference each other across
    # apps.
    head_turn_id = models.UUIDField(null=True, blank=True)
    # The head turn's pending interrupt, while one is: {"turn_id", "thread_id",
    # "interrupts": [{"id", "value"}]}.
    interrupt = models.JSONField(null=True, blank=True)
    active_turn_id = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    # The Agent Protocol's thread TTL: minutes, counted from the create or
    # patch that set it; once `expires_at` passed, maintenance deletes the
    # session, or with `ttl_strategy` keep_latest prunes its history to the
    # latest state and counts again (docs/agent-protocol.md, "Thread
    # lifecycle"). Null strategy: delete; nullable, as `pruned_before`.
    ttl_minutes = models.FloatField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    ttl_strategy = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001
    # A prune that kept the latest state (keep_latest): the checkpoint id of
    # that state; older states of the epoch are no longer in its history.
    # Nullable, so SQLite adds the column in place: rebuilding the table
    # would drop the owner-count triggers of migration 0005.
    pruned_before = models.CharField(max_length=36, null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_sessions"
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="agent_session_owner_key_uniq"),
            models.CheckConstraint(condition=Q(version__gte=0), name="agent_session_version_gte_0"),
        ]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="agent_session_owner_recent"),
            # The periodic maintenance: idle sessions to expire, old tombstones.
            models.Index(fields=["updated_at"], condition=Q(deleted_at__isnull=True), name="agent_session_live_idle"),
            models.Index(fields=["deleted_at"], condition=Q(deleted_at__isnull=False), name="agent_session_tombstones"),
            models.Index(
                fields=["expires_at"],
                condition=Q(deleted_at__isnull=True, expires_at__isnull=False),
                name="agent_session_ttl",
            ),
        ]

    # Not a column: True on the instance a transaction inserted (it has no
    # turns to look for yet).
    created_here = False
    # Not a column: the database's clock, on a row read or written through
    # core.rows (the lock's read, an insert's RETURNING); unset otherwise.
    db_now: datetime

    def __str__(self) -> str:
        return f"{self.key} ({self.owner})"

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    @property
    def interrupts(self) -> list[dict] | None:
        """What the graph waits for, while it does."""
        return self.interrupt["interrupts"] if self.interrupt else None

    # The lease: which turn holds the session, and until when. `now` is the
    # database's clock (`session_lock` reads it with the row), so two hosts
    # whose clocks disagree still agree on whether a lease is live. Its
    # writes are the lock's (sessions_app.locking.LockedSession: hold,
    # release, tombstone): only a holder of the row lock may make them.

    def has_live_turn(self, now: datetime) -> bool:
        """A turn holds the session and its lease has not run out."""
        return bool(self.active_turn_id and self.lease_expires_at and self.lease_expires_at > now)

    LEASE_FIELDS = ("active_turn_id", "lease_expires_at", "updated_at")

    @staticmethod
    def lease_length() -> timedelta:
        return timedelta(seconds=settings.AGENT_TURN_LEASE_SECONDS)

    def lease_to(self, turn_id: uuid.UUID, now: datetime) -> None:
        """`LockedSession.hold`, unsaved: the caller writes LEASE_FIELDS with its other statements."""
        self.active_turn_id = turn_id
        self.lease_expires_at = now + self.lease_length()
