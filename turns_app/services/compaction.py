"""Compacting the event logs of turns that ended long ago to their first and
final events: re-attaching still ends in the outcome, and the table stops
growing with every delta ever streamed (docs/operations.md, "Maintenance")."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Now

from turns_app.models import FINISHED, AgentTurn, AgentTurnEvent

COMPACT_BATCH = 1000


def events_compact(*, older_than_seconds: float | None = None) -> int:
    """Compact the logs of turns that ended more than the retention time ago
    to their first (`turn`) and final (`done`/`error`) events. Returns how
    many events it removed."""
    seconds = settings.AGENT_EVENT_RETENTION_SECONDS if older_than_seconds is None else older_than_seconds
    final = AgentTurnEvent.objects.filter(turn=OuterRef("turn")).order_by("-seq").values("seq")[:1]
    doomed = (
        AgentTurnEvent.objects.filter(
            turn__finished_at__lt=Now() - timedelta(seconds=seconds),
            turn__status__in=[*FINISHED, AgentTurn.Status.ABORTED],
            seq__gt=1,
        )
        .exclude(seq=Subquery(final))
        .values_list("id", flat=True)
    )
    removed = 0
    while ids := list(doomed[:COMPACT_BATCH]):
        with transaction.atomic(durable=True):
            removed += AgentTurnEvent.objects.filter(id__in=ids).delete()[0]
    return removed
