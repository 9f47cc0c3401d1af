"""One chat turn: claimed as `pending`, then `committed` (or `interrupted`:
committed, paused for a human) or `aborted`. The committed response body is
stored verbatim so a replay is byte-identical, and the state after the turn
(its new messages, fields, stage, other channel values) is stored with it:
a session's history is its turns. Its stream's events are rows of
`agent_turn_events`, numbered per turn."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from turns_app.types import checkpoint_thread_id


class AgentTurn(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        COMMITTED = "committed"
        # Committed, paused by the graph's interrupt(): a resume turn continues it.
        INTERRUPTED = "interrupted"
        ABORTED = "aborted"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: (session, epoch, number) and (session, -created_at)
    # both lead with it, and a third copy cost every turn's insert.
    session = models.ForeignKey(
        "sessions_app.AgentSession", on_delete=models.CASCADE, related_name="turns", db_index=False
    )
    epoch = models.BigIntegerField()
    number = models.IntegerField()
    base_version = models.BigIntegerField()
    # The committed turn whose state this one started from (the session's
    # head at the claim): a session's conversation is the chain up to its head.
    parent_id = models.UUIDField(null=True, blank=True)
    graph = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # NULL, not '', is "none" on the text columns marked DJ001 below: the
    # columns have always been so (a migration to change them buys nothing),
    # and the live-key unique constraint counts set keys only.
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001  (no Idempotency-Key)
    request_digest = models.CharField(max_length=64)
    request = models.JSONField()
    result = models.TextField(null=True, blank=True)  # noqa: DJ001  (not committed)
    error = models.JSONField(null=True, blank=True)
    # -- the state after the turn, written by its commit --------------------------
    # The messages it added (langchain's message_to_dict), or, when the graph
    # rewrote earlier ones, the whole conversation (`replaces_history`).
    messages = models.JSONField(default=list, blank=True)
    replaces_history = models.BooleanField(default=False)
    message_count = models.IntegerField(default=0)
    fields = models.JSONField(null=True, blank=True)
    stage = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (the graph keeps no stage)
    # The graph's other state channels, carried into the next turn.
    values = models.JSONField(default=dict, blank=True)
    version = models.BigIntegerField(null=True, blank=True)
    interrupts = models.JSONField(null=True, blank=True)
    effects = models.JSONField(null=True, blank=True)
    checkpoint_id = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001  (no pause to resume)
    # The run's checkpoints, one record per LangGraph step, each naming its
    # messages by count or id in the turn's conversation (step_records):
    # written by the commit, so an aborted turn has none.
    steps = models.JSONField(null=True, blank=True)
    # Set by a rewind to an earlier turn: its state is no longer on the way
    # to the session's head.
    superseded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agent_turns"
        constraints = [
            # An aborted turn frees its key for a retry; any other turn owns it.
            models.UniqueConstraint(
                fields=["session", "epoch", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False) & ~Q(status="aborted"),
                name="agent_turn_live_idempotency_key_uniq",
            ),
            models.UniqueConstraint(fields=["session", "epoch", "number"], name="agent_turn_session_epoch_number_uniq"),
        ]
        indexes = [
            models.Index(fields=["status"], condition=Q(status="pending"), name="agent_turn_pending"),
            models.Index(fields=["session", "-created_at"], name="agent_turn_session_recent"),
        ]
        ordering = ["session", "epoch", "number"]

    def __str__(self) -> str:
        return f"turn {self.number} of {self.session_id} (epoch {self.epoch}, {self.status})"

    @property
    def superseded(self) -> bool:
        return self.superseded_at is not None

    @property
    def checkpoint_thread(self) -> str:
        return checkpoint_thread_id(self.session_id, self.epoch, self.id)


# A turn that ended with a commit: the epoch's history has it (a paused one too).
FINISHED = (AgentTurn.Status.COMMITTED, AgentTurn.Status.INTERRUPTED)


class AgentTurnEvent(models.Model):
    """One event of a turn's stream, as it was (or will be) sent: `seq` is the
    SSE id, one sequence per turn for its whole life, live or replayed, on
    any process. `data` is the JSON text sent, verbatim."""

    id = models.BigAutoField(primary_key=True)
    turn = models.ForeignKey(AgentTurn, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.IntegerField()
    event = models.CharField(max_length=32)
    data = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_turn_events"
        constraints = [
            models.UniqueConstraint(fields=["turn", "seq"], name="agent_turn_event_seq_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.seq} {self.event} of turn {self.turn_id}"


class TurnFollower(models.Model):
    """PostgreSQL: a client waiting on a turn's events from a process that
    does not run the turn (a stream re-attached there, a claim queued behind
    it). Only a turn that has one notifies its event writes (migration
    0008): every NOTIFY takes one lock for the whole database, held through
    its commit's WAL flush, so notifying every commit serialized all turns'
    commits (docs/scale.md). A process that died leaves its rows; maintenance
    removes them once they are older than any wait can be."""

    id = models.UUIDField(primary_key=True)
    turn_id = models.UUIDField(db_index=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "agent_turn_followers"

    def __str__(self) -> str:
        return f"follower of {self.turn_id}"
