"""Calling the sync services from async code (views, the SSE consumer, the
turn runner). Django's ORM, `transaction.atomic` and `select_for_update` are
sync-only, so every service call goes through `db()`."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
import psycopg_pool
from django.conf import settings
from django.db import (
    DatabaseError,
    IntegrityError,
    OperationalError,
    close_old_connections,
    connection,
    reset_queries,
)

from core import metrics
from core.database import CheckpointerUnavailable, database_settings
from core.errors import ApiError, SessionBusy, StorageUnavailable

T = TypeVar("T")
logger = logging.getLogger(__name__)


def is_storage_error(exc: BaseException) -> bool:
    """Errors that mean "the database is not there", as opposed to a bug."""
    if isinstance(exc, IntegrityError):
        return False
    return isinstance(
        exc,
        (
            DatabaseError,
            CheckpointerUnavailable,
            psycopg.OperationalError,
            psycopg.InterfaceError,
            psycopg_pool.PoolTimeout,
            sqlite3.OperationalError,
        ),
    )


class _Statements:
    """Counts the statements a call got answers to (Django's execute_wrapper)."""

    __slots__ = ("answered",)

    def __init__(self) -> None:
        self.answered = 0

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        self.answered += 1
        return result


class _Interrupt:
    """The statement an `interruptible` call is running, so that another
    thread can stop it: `sqlite3.Connection.interrupt()`, psycopg's
    `cancel_safe()`. Under one lock with the statement's start and end, so
    an interrupt never reaches a statement of another call; once
    interrupted, the call runs no further statement."""

    __slots__ = ("interrupted", "lock", "raw")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.raw: Any = None
        self.interrupted = False

    def __call__(self, execute, sql, params, many, context):
        with self.lock:
            if self.interrupted:
                raise OperationalError("interrupted: the request's client went away")
            self.raw = context["connection"].connection
        try:
            return execute(sql, params, many, context)
        finally:
            # Waits for an interrupt in progress (a PostgreSQL cancel is a
            # round trip): the next statement must not be the one it hits.
            with self.lock:
                self.raw = None

    def interrupt(self) -> None:
        with self.lock:
            self.interrupted = True
            raw = self.raw
            if raw is None:
                return
            try:
                if isinstance(raw, sqlite3.Connection):
                    raw.interrupt()
                else:
                    raw.cancel_safe(timeout=CANCEL_SECONDS)
            except Exception:  # a connection that is gone runs nothing either
                logger.debug("interrupting a statement failed", exc_info=True)


CANCEL_SECONDS = 5.0


def _connection_died(exc: BaseException) -> bool:
    return isinstance(exc, (OperationalError, psycopg.OperationalError)) and not (
        connection.connection is not None and connection.is_usable()
    )


def _call(fn: Callable[..., T], kwargs: dict[str, Any], interrupt: _Interrupt | None = None) -> T:
    # Worker threads outlive requests, so this is their request cycle: the
    # connection comes from the pool for the call and goes back after it.
    for attempt in (1, 2):
        close_old_connections()
        statements = _Statements()
        try:
            with connection.execute_wrapper(statements), _wrapped(interrupt):
                return fn(**kwargs)
        except Exception as exc:
            # No health-check round trip per call (docs/scale.md, "Round trips"): a connection
            # that died while pooled (a database restart) fails its first
            # statement instead, and nothing was done yet, so the call is
            # made once more on a fresh one.
            interrupted = interrupt is not None and interrupt.interrupted
            if interrupted or attempt == 2 or statements.answered or not _connection_died(exc):
                raise
            _discard_dead_connections()
        finally:
            if interrupt is not None and interrupt.interrupted and connection.connection is not None:
                # Not back to the pool: a cancel the server acts on late
                # must find no other call's statement on it.
                with contextlib.suppress(Exception):
                    connection.connection.close()
            close_old_connections()
            # With DEBUG on, Django logs every statement on the connection
            # (up to 9,000 each) and clears the log at request_started, which
            # these threads never see: without this each thread kept its
            # last 9,000 statements, SQL and parameters, for good.
            reset_queries()
    raise AssertionError("unreachable")


def _wrapped(interrupt: _Interrupt | None) -> contextlib.AbstractContextManager[Any]:
    return connection.execute_wrapper(interrupt) if interrupt is not None else contextlib.nullcontext()


def _discard_dead_connections() -> None:
    connection.close()
    pool = getattr(connection, "pool", None)
    if pool is not None:
        with contextlib.suppress(Exception):
            pool.check()  # the others that died with it


def _executor() -> ThreadPoolExecutor:
    global _threads
    if _threads is None:
        with _threads_lock:
            if _threads is None:
                _threads = ThreadPoolExecutor(max_workers=db_threads(), thread_name_prefix="agentsite-db")
    return _threads


_threads: ThreadPoolExecutor | None = None
_threads_lock = threading.Lock()


def db_threads() -> int:
    """One thread per pooled connection: a step never waits for a thread
    while a connection is free (and the other way round)."""
    pool = database_settings().get("OPTIONS", {}).get("pool")
    return pool.get("max_size", 8) if isinstance(pool, dict) else 8


def _probe_executor() -> ThreadPoolExecutor:
    global _probe_threads
    if _probe_threads is None:
        with _threads_lock:
            if _probe_threads is None:
                _probe_threads = ThreadPoolExecutor(max_workers=PROBE_THREADS, thread_name_prefix="agentsite-probe")
    return _probe_threads


# Health probes only: a load balancer polls one at a time, and a second
# thread covers a probe that hangs on a database that went away.
PROBE_THREADS = 2
_probe_threads: ThreadPoolExecutor | None = None


async def db(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run a sync service on a database thread; a database that is down
    becomes `StorageUnavailable` (503), never a 500.

    Its own threads, not the loop's default executor: database steps do not
    queue behind other blocking work. A plain executor hop, not
    `sync_to_async`: a turn may outlive the request whose thread that would
    pin it to, and the hop is cheaper (docs/field-notes.md, "Async Django")."""
    return await _run(_executor(), fn, kwargs)


async def probe(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """`db(fn)` on threads of its own, for the health probe: the shared
    threads serve steps first come, first served, so behind a burst of
    requests a probe queued for seconds and a load balancer took a busy
    server for a dead one (docs/operations.md, "Health")."""
    return await _run(_probe_executor(), fn, kwargs)


async def interruptible(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """`db(fn)` for a request's long read (a search, a history, a runs
    list): when the request is cancelled — its client went away, and Django
    cancels the view — the statement running on the database thread is
    interrupted and the call runs no further one, so the thread is free
    again at once, not when the read would have ended. Reads only: a write
    cut short rolls back, and what must be written (a turn's outcome) is
    never written through here."""
    interrupt = _Interrupt()
    try:
        return await _run(_executor(), fn, kwargs, interrupt)
    except asyncio.CancelledError:
        # A PostgreSQL cancel is a blocking round trip: not on the loop.
        threading.Thread(target=interrupt.interrupt, name="agentsite-interrupt", daemon=True).start()
        raise


async def _run(
    executor: ThreadPoolExecutor, fn: Callable[..., T], kwargs: dict[str, Any], interrupt: _Interrupt | None = None
) -> T:
    context = contextvars.copy_context()
    try:
        return await asyncio.get_running_loop().run_in_executor(executor, context.run, _call, fn, kwargs, interrupt)
    except ApiError:
        raise
    except Exception as exc:
        if is_storage_error(exc):
            raise StorageUnavailable() from exc
        raise


async def retry_while_busy(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """`db(fn)`, retried while it answers `session_busy`, for up to
    AGENT_SESSION_WAIT_SECONDS; then the `session_busy` goes to the client."""
    started = time.monotonic()
    deadline = started + settings.AGENT_SESSION_WAIT_SECONDS
    delay = 0.02
    waited = False
    while True:
        try:
            result = await db(fn, **kwargs)
        except SessionBusy:
            if time.monotonic() + delay > deadline:
                metrics.session_busy_wait(started, acquired=False)
                raise
            waited = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)
            continue
        if waited:
            metrics.session_busy_wait(started, acquired=True)
        return result
