"""Which checkpoint threads a session keeps: those of its last
`AGENT_CHECKPOINT_KEEP` committed turns (and of a turn still running).
Everything else is dropped — at each commit for the turns it supersedes, and
by `manage.py sweep_checkpoints` for what a commit cannot see (late writes
from a deleted epoch or a run whose lease was taken)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import connection, transaction

from agentsite.agent.checkpointer import delete_threads
from sessions_app.models import AgentSession
from turns_app.models import AgentTurn, checkpoint_thread_id


def retention_apply(*, session: AgentSession, turn: AgentTurn) -> None:
    """Call inside the commit's transaction, after `turn` is committed.
    Drops the threads of every turn before the newest kept one: aborted runs,
    and committed ones that fell out of the window. Turns older than the
    previous window were dropped by an earlier commit, so the work per commit
    stays bounded."""
    keep = settings.AGENT_CHECKPOINT_KEEP
    committed = list(
        AgentTurn.objects.filter(
            session=session, epoch=turn.epoch, status=AgentTurn.Status.COMMITTED
        )
        .order_by("-number")
        .values_list("id", "number")[: keep + 1]
    )
    kept = {turn_id for turn_id, _ in committed[:keep]}
    floor = committed[keep][1] if len(committed) > keep else 0
    candidates = (
        AgentTurn.objects.filter(
            session=session, epoch=turn.epoch, number__gte=floor, number__lt=turn.number
        )
        .exclude(id__in=kept)
        .values_list("id", flat=True)
    )
    delete_threads(sorted(checkpoint_thread_id(session.id, turn.epoch, t) for t in candidates))


def _parse_thread(thread_id: str) -> tuple[uuid.UUID, int, uuid.UUID] | None:
    try:
        session_id, epoch, turn_id = thread_id.split(":")
        return uuid.UUID(session_id), int(epoch), uuid.UUID(turn_id)
    except ValueError:
        return None


def checkpoints_sweep(*, dry_run: bool = False) -> list[str]:
    """Drop every checkpoint thread that no session would read again. Scans
    the checkpointer's table: an operator's (or cron's) job, not a request's.
    Threads whose names are not ours are left alone. Returns what it dropped."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT thread_id FROM checkpoints")
        threads = [row[0] for row in cursor.fetchall()]
    parsed = {t: p for t in threads if (p := _parse_thread(t)) is not None}
    turns = {
        t.id: t
        for t in AgentTurn.objects.filter(id__in=[p[2] for p in parsed.values()]).only(
            "id", "session_id", "epoch", "number", "status"
        )
    }
    keep = settings.AGENT_CHECKPOINT_KEEP
    kept_committed: dict[tuple[uuid.UUID, int], set[uuid.UUID]] = {}
    doomed = []
    for thread_id, (session_id, epoch, turn_id) in parsed.items():
        turn = turns.get(turn_id)
        if turn is None or turn.session_id != session_id or turn.epoch != epoch:
            doomed.append(thread_id)
        elif turn.status == AgentTurn.Status.ABORTED:
            doomed.append(thread_id)
        elif turn.status == AgentTurn.Status.COMMITTED:
            window = kept_committed.get((session_id, epoch))
            if window is None:
                window = set(
                    AgentTurn.objects.filter(
                        session_id=session_id, epoch=epoch, status=AgentTurn.Status.COMMITTED
                    )
                    .order_by("-number")
                    .values_list("id", flat=True)[:keep]
                )
                kept_committed[(session_id, epoch)] = window
            if turn_id not in window:
                doomed.append(thread_id)
    if doomed and not dry_run:
        with transaction.atomic():
            delete_threads(sorted(doomed))
    return sorted(doomed)
