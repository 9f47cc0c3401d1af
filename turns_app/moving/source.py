"""The database a move copies from (the server's own): held against any
server for the whole move, and read by the checkpointer's own saver."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections
from langgraph.checkpoint.base import BaseCheckpointSaver

from core.database import is_postgres, postgres_conninfo, sqlite_lock_path
from turns_app.checkpoint_tables import SQLITE_TIMEOUT_SECONDS
from turns_app.moving.report import MoveRefused


@contextmanager
def source_not_served() -> Iterator[None]:
    """Hold the server's lock on the SQLite file for the whole move: refused
    while a server serves it, and no server starts until the move is over."""
    settings_dict = connections[DEFAULT_DB_ALIAS].settings_dict
    if is_postgres(settings_dict):
        yield
        return
    path = sqlite_lock_path(settings_dict["NAME"])
    with open(path, "a+") as handle:  # closing it lets go of the lock
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise MoveRefused(
                f"an agentsite server (pid {holder}) is serving {settings_dict['NAME']}: "
                "stop it first, so that no turn changes the sessions while they move"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield


def source_saver() -> tuple[BaseCheckpointSaver, Callable[[], None]]:
    settings_dict = connections[DEFAULT_DB_ALIAS].settings_dict
    if is_postgres(settings_dict):
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        pg = psycopg.connect(
            postgres_conninfo(settings_dict), autocommit=True, row_factory=dict_row, prepare_threshold=None
        )
        return PostgresSaver(pg), pg.close
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(settings_dict["NAME"], timeout=SQLITE_TIMEOUT_SECONDS, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.is_setup = True  # migrate made the tables; setup() would commit and rewrite pragmas
    return saver, conn.close
