"""What changes a session's history rather than adding to it: a rewind to an
earlier committed turn (the turns after it stay, marked superseded), a fork
into a new session from one of its turns, a prune that keeps only the
latest state, and the purge of a deleted session's turns with the tombstone. The history itself is the chain of
turns (turns_app.history reads it)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from core.errors import SessionBusy, SessionNotFound, TurnNotFound, VersionConflict
from sessions_app.selectors import KEEP_LATEST, session_get, sessions_expired_by
from sessions_app.services import LockedSession, session_insert, session_lock
from turns_app.checkpoint_tables import delete_threads
from turns_app.history import chain_ids
from turns_app.models import AgentTurn
from turns_app.services.event_rows import copied_log, write_events
from turns_app.services.lease import expire_dead_turn
from turns_app.types import checkpoint_thread_id, current_ref

if TYPE_CHECKING:
    from sessions_app.selectors import AgentSession


def history_turn(session: AgentSession, turn_id: UUID | None) -> AgentTurn | None:
    """A committed turn of the session's current epoch (None: the start)."""
    if turn_id is None:
        return None
    turn = AgentTurn.objects.filter(
        pk=turn_id, session=session, epoch=session.epoch, status=AgentTurn.Status.COMMITTED
    ).first()
    if turn is None:
        raise TurnNotFound("no committed turn with this id in the session (an interrupted one cannot be a start)")
    return turn


def session_rewind(*, owner: str, key: str, turn_id: UUID | None, expected_version: int) -> AgentSession:
    """Take the session back to just after `turn_id` (None: before the first
    turn): its conversation, fields and stage become that turn's, the version
    moves on, and the turns after it stay in the log, marked superseded. The
    next turn starts from there. Version-conditional; refused while a turn
    runs. A pause the rewind leaves behind is dropped with its checkpoints."""
    session = session_get(owner=owner, key=key)
    with transaction.atomic(durable=True):
        locked = session_lock(session_id=session.id)
        session = locked.session
        if session.version != expected_version:
            raise VersionConflict(
                f"the session is at version {session.version}, not {expected_version}",
                details={"version": session.version},
            )
        expire_dead_turn(locked)
        if session.has_live_turn(locked.now):
            raise SessionBusy(holder=session.active_turn_id)
        target = history_turn(session, turn_id)
        if target is not None and target.id not in chain_ids(session.head_turn_id):
            raise TurnNotFound("the turn is not on the way to the session's current state")
        rewind_locked(locked, target)
        return session


def rewind_locked(locked: LockedSession, target: AgentTurn | None) -> None:
    """With no live turn on the session: its state becomes the one just
    after `target` (None: the start), which may be on another branch of the
    epoch's history: the turns on the way to the old head and not to the
    new one are marked superseded, those on the way to the new one no longer
    are. A pause left behind is dropped with its checkpoints; the version
    moves on."""
    session = locked.session
    supersede_for(locked, target.id if target is not None else None)
    if session.interrupt is not None:
        delete_threads([session.interrupt["thread_id"]])
    session.head_turn_id = target.id if target is not None else None
    session.fields = (target.fields if target is not None else None) or {}
    session.stage = (target.stage if target is not None else None) or session.DEFAULT_STAGE
    session.interrupt = None
    session.version += 1
    session.save(update_fields=["head_turn_id", "fields", "stage", "interrupt", "version", "updated_at"])


def supersede_for(locked: LockedSession, new_head: UUID | None) -> None:
    """The session's head moves to `new_head`, maybe on another branch of
    the epoch's history: the turns on the way to the old head and not to the
    new one are marked superseded, those on the way to the new one no longer
    are."""
    old = set(chain_ids(locked.session.head_turn_id))
    new = set(chain_ids(new_head)) if new_head is not None else set()
    AgentTurn.objects.filter(pk__in=old - new).update(superseded_at=locked.now)
    AgentTurn.objects.filter(pk__in=new, superseded_at__isnull=False).update(superseded_at=None)


def session_fork(*, owner: str, key: str, turn_id: UUID | None, new_key: str) -> AgentSession:
    """A new session of the same owner, graph and form, starting from the
    state just after `turn_id` (None: the start) of this one: the turns up
    to it are copied, with their logs (a first event and `done`), so the
    two histories are independent from here on.
    Into a deleted key, the version goes on from the tombstone's (never
    back: an If-Match from before the delete must not match the fork)."""
    source = session_get(owner=owner, key=key)
    target = history_turn(source, turn_id)
    chain = chain_ids(target.id) if target is not None else []
    turns = {t.id: t for t in AgentTurn.objects.filter(pk__in=chain)}
    # One commit: a crash or error mid-copy leaves no half-forked session.
    with transaction.atomic(durable=True):
        fork = session_insert(owner=owner, key=new_key, form=source.form, metadata=source.metadata, graph=source.graph)
        fork = session_lock(session_id=fork.id).session
        # Where the key's versions stand: 0 for a new session, a revived
        # tombstone's version moved on by its revival (sessions_app's
        # revive); one more per copied turn from there, never back.
        start = fork.version
        parent = None
        for number, original_id in enumerate(chain, start=1):
            original = turns[original_id]
            copy_id = uuid.uuid4()
            copy = AgentTurn.objects.create(
                id=copy_id,
                session=fork,
                epoch=fork.epoch,
                number=number,
                base_version=start + number - 1,
                parent_id=parent,
                graph=original.graph,
                status=original.status,
                request_digest=original.request_digest,
                request=original.request,
                result=_copied_result(original, copy_id, fork.epoch, start + number),
                messages=original.messages,
                replaces_history=original.replaces_history,
                message_count=original.message_count,
                fields=original.fields,
                stage=original.stage,
                values=original.values,
                steps=original.steps,
                version=start + number,
                finished_at=original.finished_at,
            )
            # Its log too: without one, a join or re-attach of the copy
            # took it for a turn deleted while it ran.
            write_events(copy.id, copied_log(copy))
            parent = copy.id
        fork.head_turn_id = parent
        fork.fields = (target.fields if target is not None else None) or {}
        fork.stage = (target.stage if target is not None else None) or fork.DEFAULT_STAGE
        fork.version = start + len(chain)
        fork.turn_count = len(chain)
        fork.save(update_fields=["head_turn_id", "fields", "stage", "version", "turn_count", "updated_at"])
    return fork


def _copied_result(original: AgentTurn, copy_id: UUID, epoch: int, version: int) -> str | None:
    """The original's stored body, naming the copy: its turn id, and the
    fork's epoch and version after it."""
    if original.result is None:
        return None
    body = json.loads(original.result)
    body.update(turn_id=str(copy_id), epoch=epoch, version=version)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def session_history_prune(*, session_id: UUID, expired_by: datetime | None = None) -> bool:
    """Keep only the latest state of the session's history (LangGraph's
    prune `keep_latest`): the records of every earlier checkpoint go (the
    head turn keeps its last one, the state it is in), and the session
    remembers which state was latest, so the protocol's history starts
    there. The turns stay: they are its runs, and the conversation of the
    state kept is the chain of their messages. Nothing a run reads changes,
    so it needs no idle session and moves no version.

    `expired_by` (the thread TTL of strategy keep_latest): prune only a
    session whose TTL ran out by then, checked under the lock, and count
    its TTL again from now; False when it is left as it was."""
    with transaction.atomic(durable=True):
        locked = session_lock(session_id=session_id)
        session = locked.session
        if expired_by is not None:
            if session.ttl_strategy != KEEP_LATEST or session.expires_at is None or session.expires_at > expired_by:
                return False
            session.expires_at = locked.now + timedelta(minutes=session.ttl_minutes or 0)
            session.save(update_fields=["expires_at"])
        head = AgentTurn.objects.filter(pk=session.head_turn_id).first() if session.head_turn_id else None
        session.pruned_before = current_ref(session.epoch, session.version, head).id
        others = AgentTurn.objects.filter(session=session, steps__isnull=False)
        if head is not None:
            others = others.exclude(pk=head.pk)
            if head.steps and len(head.steps) > 1:
                head.steps = head.steps[-1:]
                head.save(update_fields=["steps"])
        others.update(steps=None)
        session.save(update_fields=["pruned_before"])
    return True


def sessions_prune_ttl(*, limit: int) -> int:
    """Prune up to `limit` live sessions whose thread TTL of strategy
    keep_latest ran out (`session_history_prune`). Returns how many."""
    now = timezone.now()
    pruned = 0
    for session_id in sessions_expired_by(now, limit=limit, keep_latest=True):
        try:
            pruned += session_history_prune(session_id=session_id, expired_by=now)
        except SessionNotFound:
            continue  # deleted since it was picked
    return pruned


def session_turns_purge(*, locked: LockedSession, **_: object) -> None:
    """Receiver of `sessions_app.signals.session_deleting`, inside the
    delete's transaction with the session locked: drop every checkpoint
    thread and every turn of the session, so they go with the tombstone or
    not at all. Connected in `TurnsAppConfig.ready`."""
    session = locked.session
    # Locked first: a running turn's event batch (written outside the
    # session's lock) takes a key-share lock on its turn row, so it either
    # lands before this and is deleted with the turn, or waits and then
    # finds the turn gone. Unlocked, a batch landing between the cascade's
    # read and the commit breaks the foreign key (PostgreSQL).
    turns = list(AgentTurn.objects.select_for_update().filter(session=session).values_list("id", "epoch"))
    delete_threads(sorted({checkpoint_thread_id(session.id, epoch, turn_id) for turn_id, epoch in turns}))
    AgentTurn.objects.filter(session=session).delete()
