"""What the serving process (daphne, or runserver's serving child) does before
it takes requests. Management commands and the autoreloader never call it."""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.db.migrations.executor import MigrationExecutor

from agentsite.agent.checkpointer import close_savers
from agentsite.agent.registry import check_registry
from agentsite.database import is_postgres
from turns_app.checkpoints import schema_problem
from turns_app.services import turns_abort_pending
from turns_app.wakeups import stop_listening

logger = logging.getLogger(__name__)

_lock_handle = None  # held for the life of the process; the OS drops it on exit


class StartupError(ImproperlyConfigured):
    pass


def check_database() -> None:
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        plan = MigrationExecutor(connection).migration_plan(
            MigrationExecutor(connection).loader.graph.leaf_nodes()
        )
    except OperationalError as exc:
        raise StartupError(
            f"cannot reach the database ({connection.settings_dict['ENGINE']}): {exc}. "
            "Check DATABASE_URL."
        ) from exc
    if plan:
        raise StartupError(
            f"the database has {len(plan)} unapplied migration(s): "
            "run `python manage.py migrate` first"
        )
    problem = schema_problem()
    if problem is not None:
        raise StartupError(problem)
    check_registry()


def lock_sqlite_file() -> None:
    """SQLite mode is single-process: the aiosqlite checkpointer and Django's
    lease protocol are only safe with one server on the file."""
    global _lock_handle
    name = Path(connections[DEFAULT_DB_ALIAS].settings_dict["NAME"])
    lock_path = name.with_name(name.name + ".lock")
    handle = open(lock_path, "a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise StartupError(
            f"another agentsite server (pid {holder}) is already serving {name}. "
            "SQLite mode allows one server process per database file; stop it, "
            "or use PostgreSQL (DATABASE_URL=postgres://…) to run several."
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    _lock_handle = handle


async def close_connections() -> None:
    """What this process holds open on its event loop: the checkpointer's
    pool and the turn-event LISTEN connection."""
    await stop_listening()
    await close_savers()


def install_shutdown_hook() -> None:
    """daphne speaks no ASGI lifespan, so the checkpointer's pool is closed
    from the Twisted reactor's shutdown instead, on the loop that opened it."""
    import sys

    if "twisted.internet.reactor" not in sys.modules:
        return  # not under daphne: the process exit closes the sockets
    import asyncio

    from twisted.internet import defer, reactor

    def close() -> defer.Deferred:
        return defer.Deferred.fromFuture(asyncio.ensure_future(close_connections()))

    reactor.addSystemEventTrigger("before", "shutdown", close)


def prepare_serving() -> None:
    check_database()
    if not is_postgres(connections[DEFAULT_DB_ALIAS].settings_dict):
        lock_sqlite_file()
        aborted = turns_abort_pending()
        if aborted:
            logger.warning("aborted %d turn(s) left pending by a previous server", aborted)
    connections.close_all()
    install_shutdown_hook()
