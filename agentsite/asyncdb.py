"""Calling the sync services from async code (views, the SSE consumer, the
turn runner). Django's ORM, `transaction.atomic` and `select_for_update` are
sync-only, so every service call goes through `db()`."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import psycopg_pool
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections

from agentsite.agent.checkpointer import CheckpointerUnavailable
from agentsite.errors import ApiError, SessionBusy, StorageUnavailable

T = TypeVar("T")


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


async def db(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run a sync service in a worker thread; a database that is down becomes
    `StorageUnavailable` (503), never a 500."""

    def call() -> T:
        # Worker threads outlive requests, so this is their request cycle:
        # drop a connection an outage broke before the call, and one past
        # CONN_MAX_AGE (0 by default: every call) after it.
        close_old_connections()
        try:
            return fn(**kwargs)
        finally:
            close_old_connections()

    try:
        # Not thread_sensitive: a turn may outlive the request whose
        # per-request thread that mode would pin it to.
        return await sync_to_async(call, thread_sensitive=False)()
    except ApiError:
        raise
    except Exception as exc:
        if is_storage_error(exc):
            raise StorageUnavailable() from exc
        raise


async def retry_while_busy(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """`db(fn)`, retried while it answers `session_busy`, for up to
    AGENT_SESSION_WAIT_SECONDS; then the `session_busy` goes to the client."""
    deadline = time.monotonic() + settings.AGENT_SESSION_WAIT_SECONDS
    delay = 0.02
    while True:
        try:
            return await db(fn, **kwargs)
        except SessionBusy:
            if time.monotonic() + delay > deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)
