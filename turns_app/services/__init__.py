"""The database steps of a turn — claim, renew, commit, abort, cancel — and
what changes a session's history: rewind, fork, the purge of a deleted
session's turns.

Each step is one short, durable `transaction.atomic()` that locks the session
row first (sessions_app.locking: `session_lock` hands out the
`LockedSession` every step under the lock takes); none is held while the
model runs (docs/turn-protocol.md). Durable, so calling one inside another
transaction fails loudly instead of silently moving its commit point. They
are sync and return plain data (turns_app.types); async callers go through
`core.asyncdb.db`.

One module per step, in the order a turn meets them:

    idempotency.py     the Idempotency-Key, checked; a request's digest
    claim.py           turn_claim: lock, expire, idempotency, the pending
                       turn with the lease (a new session's in one statement)
    lease.py           turn_renew_lease; expiring turns whose lease ran out
    event_rows.py      the rows of a turn's events: a running turn's batches
                       (events_append), its final event under the lock
    commit.py          turn_commit: fenced, one statement or under the lock
    abort.py           turn_abort, turn_cancel, the start-up abort
    turn_lock.py       a turn's session locked, found from the turn
    session_history.py rewind, fork, prune to the latest state, the purge of
                       a deleted session's turns
    compaction.py      old turns' logs cut to their first and final events
"""

from turns_app.services.abort import turn_abort, turn_cancel, turns_abort_pending
from turns_app.services.claim import claim_reads, turn_claim, turn_event_data
from turns_app.services.commit import render_result, turn_commit
from turns_app.services.compaction import events_compact
from turns_app.services.event_rows import events_append
from turns_app.services.idempotency import check_idempotency_key, request_digest
from turns_app.services.lease import turn_expire_if_dead, turn_renew_lease, turns_expire_dead
from turns_app.services.session_history import (
    session_fork,
    session_history_prune,
    session_rewind,
    session_turns_purge,
    sessions_prune_ttl,
)

__all__ = [
    "check_idempotency_key",
    "claim_reads",
    "events_append",
    "events_compact",
    "render_result",
    "request_digest",
    "session_fork",
    "session_history_prune",
    "session_rewind",
    "session_turns_purge",
    "sessions_prune_ttl",
    "turn_abort",
    "turn_cancel",
    "turn_claim",
    "turn_commit",
    "turn_event_data",
    "turn_expire_if_dead",
    "turn_renew_lease",
    "turns_abort_pending",
    "turns_expire_dead",
]
