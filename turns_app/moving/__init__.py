"""Moving every session from this database to a PostgreSQL one
(`manage.py move_sessions --to postgres://…`): for the user who started on
the embedded SQLite file and outgrew it. PostgreSQL → PostgreSQL works too.

What moves: every row of every model of the apps that hold conversations
(`MOVED_APPS`: sessions and their tombstones, API keys, turns with their
history, turn events, assistants and their versions, bookings), with primary keys, versions, epochs and
timestamps as they are; and every LangGraph checkpoint thread, through the
savers' own API. A conversation continues from its turns rows (the history
is in the business tables, turns_app.history), so those need no checkpoint;
the threads that matter are those of paused runs (a pending `interrupt()`),
which a resume reads back from the checkpointer, and they are copied with
their pending writes. Django's own tables (admin accounts, their browser
sessions, content types, login throttling) are not moved: `NOT_MOVED` says
why, and a test fails when a model is in neither list.

How: the target is migrated first (it may be a fresh, empty database); one
that already holds any moved row is refused unless `replace=True`, which
empties those tables and the checkpointer's first. Rows are read in
primary-key order, `BATCH_SIZE` at a time, and written in one transaction
on the target, so a failed move leaves the target's tables as they were.
The source is read inside one transaction too: on SQLite that is an
IMMEDIATE one, so nothing can write the file while it is read, and the
server's file lock (agentsite.startup) is taken for the whole move, so a
server neither serves the file during it nor starts in the middle.

The modules, in the order a move runs them:

    moved_models.py     what moves (MOVED_APPS), what stays (NOT_MOVED,
                        DERIVED), parents first
    target.py           the target's URL, its connection alias, what it holds
    source.py           the source held against any server; its saver
    copy_rows.py        the business rows, a page at a time; the NUL check
    copy_checkpoints.py the checkpoint threads with their pending writes
    move.py             move_sessions: refuse, migrate, copy, commit
    report.py           MoveReport, MoveRefused
"""

from turns_app.moving.copy_rows import BATCH_SIZE
from turns_app.moving.move import move_sessions
from turns_app.moving.moved_models import DERIVED, MOVED_APPS, NOT_MOVED, moved_models
from turns_app.moving.report import MoveRefused, MoveReport

__all__ = [
    "BATCH_SIZE",
    "DERIVED",
    "MOVED_APPS",
    "NOT_MOVED",
    "MoveRefused",
    "MoveReport",
    "move_sessions",
    "moved_models",
]
