"""What the serving process (daphne, or runserver's serving child) does before
it takes requests. Management commands and the autoreloader never call it."""

from __future__ import annotations

import asyncio
import atexit
import fcntl
import gc
import logging
import os
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections

from agentsite import graceful_stop
from agentsite.cli import already_serving, refuse_to_start
from core.database import (
    explain_connect_error,
    is_postgres,
    migration_problem,
    probe_database,
    sqlite_lock_path,
)
from core.logs import route_daphne_access_log
from graphs.runtime.registry import check_registry
from graphs.runtime.savers import close_savers
from graphs.runtime.store import close_stores
from langgraph_app.custom_app import custom_app, start_lifespan, stop_lifespan
from sessions_app.auth import uses_custom_auth
from turns_app.checkpoint_tables import schema_problem
from turns_app.maintenance import maintenance
from turns_app.services import turns_abort_pending
from turns_app.store_tables import store_problem
from turns_app.wakeups import stop_listening

logger = logging.getLogger(__name__)

_lock_handle = None  # held for the life of the process; the OS drops it on exit


class StartupError(ImproperlyConfigured):
    pass


def check_database() -> None:
    settings_dict = connections[DEFAULT_DB_ALIAS].settings_dict
    probe_database(settings_dict)
    try:
        problem = migration_problem() or schema_problem() or store_problem()
    except OperationalError as exc:
        raise StartupError(explain_connect_error(exc, settings_dict)) from exc
    if problem is not None:
        raise StartupError(problem)
    check_registry()
    # A bad AGENT_AUTH_PATH is refused at start, not at the first request.
    uses_custom_auth()


def lock_sqlite_file() -> None:
    """SQLite mode is single-process: the aiosqlite checkpointer and Django's
    lease protocol are only safe with one server on the file."""
    global _lock_handle
    name = Path(connections[DEFAULT_DB_ALIAS].settings_dict["NAME"])
    lock_path = sqlite_lock_path(name)
    handle = open(lock_path, "a+")  # noqa: SIM115  (held, locked, for the process's whole life)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise StartupError(already_serving(name, holder)) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    _lock_handle = handle


async def close_connections() -> None:
    """What this process holds open on its event loop: the maintenance task
    and its lock, the checkpointer's pool and the turn-event LISTEN
    connection."""
    await stop_lifespan()  # first: the app's shutdown may still use the stores
    await maintenance.stop()
    await stop_listening()
    await close_stores()  # before the savers: on PostgreSQL it borrows their pool
    await close_savers()


def install_shutdown_hook() -> None:
    """daphne speaks no ASGI lifespan, so the checkpointer's pool is closed
    from the Twisted reactor's shutdown instead, on the loop that opened it.

    Under runserver's autoreloader the reactor runs on a daemon thread and
    Ctrl-C ends the main thread: the reactor never shuts down, and the
    interpreter tore the aiosqlite connection down with its modules half
    gone ("Exception ignored in: … aiosqlite … TypeError"). So at exit, a
    reactor still running is asked to close them first, on its own loop."""
    import sys

    if "twisted.internet.reactor" not in sys.modules:
        return  # not under daphne: the process exit closes the sockets
    from twisted.internet import defer, reactor

    def close() -> defer.Deferred:
        return defer.Deferred.fromFuture(asyncio.ensure_future(close_connections()))

    # The ignore: zope.interface declares methods without self, which mypy
    # reads right only with the mypy-zope plugin.
    reactor.addSystemEventTrigger("before", "shutdown", close)  # type: ignore[arg-type]
    # callLater: on the loop, once it runs.
    reactor.callWhenRunning(reactor.callLater, 0, _close_at_exit)


# How long the exit waits for the serving loop to close its connections.
EXIT_CLOSE_SECONDS = 5.0


def _close_at_exit() -> None:
    loop = asyncio.get_running_loop()

    def close() -> None:
        if loop.is_closed() or not loop.is_running():
            return  # the reactor shut down: its trigger closed them
        closing = asyncio.run_coroutine_threadsafe(close_connections(), loop)
        try:
            closing.result(EXIT_CLOSE_SECONDS)
        except Exception:
            logger.warning("closing the checkpointer at exit failed", exc_info=True)

    atexit.register(close)


def start_maintenance() -> None:
    """The periodic maintenance runs on the server's event loop once it runs
    (daphne has no ASGI lifespan to start it from)."""
    import sys

    if "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import reactor

    reactor.callWhenRunning(reactor.callLater, 0, maintenance.start)


def start_custom_app() -> None:
    """http.app: imported now, so a bad one stops the start-up; its lifespan
    started on the server's loop once it runs (docs/configuration.md,
    "Custom routes"), and a start-up that fails stops the server."""
    import sys

    if custom_app() is None or "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import reactor

    async def start() -> None:
        failed = await start_lifespan()
        if failed is not None:
            await close_connections()
            refuse_to_start(f"http.app's lifespan start-up failed: {failed}")

    reactor.callWhenRunning(reactor.callLater, 0, lambda: asyncio.ensure_future(start()))


def start_health() -> None:
    """The loop's heartbeat; `/api/health` answered early on daphne's port
    from an answer a thread keeps fresh (core.http.health_early); and, with
    AGENT_HEALTH_PORT, on a thread of its own (core.http.health_port)."""
    import sys

    from core.http.health_early import Refreshed
    from core.http.health_port import Heartbeat, serve
    from turns_app import health

    heartbeat = Heartbeat()
    health.refreshed = Refreshed(health.PortProbe(heartbeat)).start()
    if settings.AGENT_HEALTH_PORT:
        try:
            serve(settings.AGENT_HEALTH_HOST, settings.AGENT_HEALTH_PORT, health.PortProbe(heartbeat))
        except OSError as exc:
            where = f"{settings.AGENT_HEALTH_HOST}:{settings.AGENT_HEALTH_PORT}"
            raise StartupError(f"cannot listen on the health port {where} (AGENT_HEALTH_PORT): {exc.strerror}") from exc
    if "twisted.internet.reactor" in sys.modules:
        from twisted.internet import reactor

        reactor.callWhenRunning(heartbeat.start, reactor.callLater)


def prepare_serving() -> None:
    if settings.LOG_FORMAT == "json":
        route_daphne_access_log()
    check_database()
    if not is_postgres(connections[DEFAULT_DB_ALIAS].settings_dict):
        lock_sqlite_file()
        aborted = turns_abort_pending()
        if aborted:
            logger.warning("aborted %d turn(s) left pending by a previous server", aborted)
    connections.close_all()
    install_shutdown_hook()
    graceful_stop.install()
    start_maintenance()
    start_custom_app()
    start_health()


def freeze_startup_heap() -> None:
    """Call last, once the process is ready to serve. What it loaded by then
    (Django, LangChain, LangGraph, pydantic, the app: some 235,000 objects)
    lives as long as the process: frozen, the cyclic collector stops walking
    it on every full collection, each of which cost 60 ms of CPU with the
    event loop stalled. Two daphne processes served 10% more turns/s
    (docs/scale.md, "CPU")."""
    gc.collect()
    gc.freeze()
