"""The database a move copies into: its URL checked into Django settings,
a connection alias of its own for the move, and what it already holds."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from django.db import DEFAULT_DB_ALIAS, connections

from core.database import explain_connect_error, postgres_conninfo
from turns_app.moving.moved_models import moved_models
from turns_app.moving.report import MoveRefused

# The target's connection alias while a move runs; never one settings define.
TARGET_ALIAS = "move_sessions_target"
POSTGRES_SCHEMES = {"postgres", "postgresql", "pgsql"}
URL_FORM = "postgres://USER:PASSWORD@HOST:5432/NAME"

# Identifies one database on one running server (a host name and an address
# may name the same one).
SQL_DATABASE_IDENTITY = "SELECT current_database(), pg_postmaster_start_time()::text, coalesce(inet_server_port(), 0)"
SQL_DELETE_ALL = "DELETE FROM {table}"


def target_settings(url: str) -> dict[str, Any]:
    """Django settings for the database `url` names; only PostgreSQL."""
    import dj_database_url

    scheme = urlsplit(url).scheme if "://" in url else ""
    if scheme not in POSTGRES_SCHEMES:
        raise MoveRefused(f"--to must be a PostgreSQL URL ({URL_FORM}), got {masked(url)!r}")
    try:
        # A plain dict, as Django's DATABASES entries are (not the parser's TypedDict).
        config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=0))
    except ValueError as exc:
        raise MoveRefused(f"--to {masked(url)!r} is not a database URL ({exc}): use {URL_FORM}") from None
    if not config.get("NAME"):
        raise MoveRefused(f"--to {masked(url)!r} names no database: use {URL_FORM}")
    config.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
    return config


def masked(url: str) -> str:
    return re.sub(r"(//[^:/@]*:)[^@]*@", r"\1***@", url)


@contextmanager
def target_connection(config: dict[str, Any]) -> Iterator[str]:
    """`config` as a connection alias for as long as the block runs; closed
    and forgotten after. The alias is not one the settings define, so it can
    never stand in for `default`."""
    if TARGET_ALIAS in connections.settings or TARGET_ALIAS == DEFAULT_DB_ALIAS:
        raise RuntimeError(f"the connection alias {TARGET_ALIAS!r} is already in use")
    full = connections.configure_settings(
        {DEFAULT_DB_ALIAS: dict(connections.settings[DEFAULT_DB_ALIAS]), TARGET_ALIAS: config}
    )
    connections.settings[TARGET_ALIAS] = full[TARGET_ALIAS]
    try:
        yield TARGET_ALIAS
    finally:
        try:
            connections[TARGET_ALIAS].close()
        finally:
            with contextlib.suppress(AttributeError):  # no connection was opened in this thread
                del connections[TARGET_ALIAS]
            del connections.settings[TARGET_ALIAS]


def probe(config: dict[str, Any]) -> None:
    import psycopg

    try:
        psycopg.connect(postgres_conninfo(config)).close()
    except psycopg.Error as exc:
        raise MoveRefused(explain_connect_error(exc, config)) from None


def identity(alias: str) -> tuple:
    with connections[alias].cursor() as cursor:
        cursor.execute(SQL_DATABASE_IDENTITY)
        return tuple(cursor.fetchone())


def held_rows(alias: str) -> dict[str, int]:
    held = {}
    for model in moved_models():
        count = model._base_manager.using(alias).count()
        if count:
            held[model._meta.db_table] = count
    return held


def empty_target(alias: str) -> None:
    """The business tables only: the checkpoint tables are emptied on the
    connection that then writes them (one transaction holding row locks the
    other waits for would hang the move)."""
    conn = connections[alias]
    with conn.cursor() as cursor:
        for model in reversed(moved_models()):
            cursor.execute(SQL_DELETE_ALL.format(table=conn.ops.quote_name(model._meta.db_table)))
