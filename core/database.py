"""Facts about Django's default database that the checkpointer, the health
probe and the start-up checks share; and what to tell an operator when it is
not there."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

CONNECT_TIMEOUT_SECONDS = 5


class DatabaseUnavailable(ImproperlyConfigured):
    """The database cannot be used at all (start-up, management commands);
    the message says where it was looked for and what to do."""


def database_settings() -> dict[str, Any]:
    # The live settings_dict, not DATABASE_URL: under test it names the test database.
    return connections["default"].settings_dict


def is_postgres(settings_dict: dict[str, Any] | None = None) -> bool:
    return "postgresql" in (settings_dict or database_settings())["ENGINE"]


def sqlite_lock_path(name: str | Path) -> Path:
    """The file the serving process locks for as long as it serves an SQLite
    database (agentsite.startup); anything that must not run beside a server
    (moving the database away) takes the same lock."""
    name = Path(name)
    return name.with_name(name.name + ".lock")


def postgres_conninfo(settings_dict: dict[str, Any]) -> str:
    # Built by hand: Django's get_connection_params() carries its sync cursor
    # factory, which breaks the async saver (docs/field-notes.md, "Connections and lifetimes").
    from psycopg.conninfo import make_conninfo

    params = {
        "dbname": settings_dict.get("NAME") or "postgres",
        "user": settings_dict.get("USER") or None,
        "password": settings_dict.get("PASSWORD") or None,
        "host": settings_dict.get("HOST") or None,
        "port": str(settings_dict["PORT"]) if settings_dict.get("PORT") else None,
    }
    for key in ("sslmode", "sslrootcert", "sslcert", "sslkey", "application_name", "connect_timeout"):
        if settings_dict.get("OPTIONS", {}).get(key):
            params[key] = settings_dict["OPTIONS"][key]
    # A server that accepts and never answers (a dead network path) must not
    # hold a connection attempt, or a pool worker, forever.
    params.setdefault("connect_timeout", str(CONNECT_TIMEOUT_SECONDS))
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


# --- telling an operator what is wrong ------------------------------------------------


def _where(settings_dict: dict[str, Any]) -> tuple[str, str, str, str]:
    host = settings_dict.get("HOST") or "localhost"
    port = str(settings_dict.get("PORT") or 5432)
    return host, port, settings_dict.get("NAME") or "postgres", settings_dict.get("USER") or ""


def _server_reason(message: str) -> str:
    """psycopg's "connection failed: connection to server at …, port … failed:
    FATAL:  database "x" does not exist" → 'database "x" does not exist'."""
    first = message.strip().splitlines()[0] if message.strip() else message
    reason = first.rsplit(" failed: ", 1)[-1]
    return re.sub(r"^(FATAL|ERROR):\s+", "", reason).strip() or type(message).__name__


# How an operator applies the migrations: the Makefile's target (README's
# set-up), or the command itself under docker-compose or a bare venv.
MIGRATE = "`make migrate` (or `manage.py migrate`)"


def explain_connect_error(exc: BaseException, settings_dict: dict[str, Any]) -> str:
    """One line: which database could not be used, why, and what to do."""
    if not is_postgres(settings_dict):
        return f"cannot open the SQLite database {settings_dict.get('NAME')}: {exc}. Check DATABASE_URL."
    host, port, name, user = _where(settings_dict)
    reason = _server_reason(str(exc))
    lowered = reason.lower()
    if f'database "{name.lower()}" does not exist' in lowered:
        user_flag = f" -U {user}" if user else ""
        return (
            f'PostgreSQL at {host}:{port} has no database "{name}": create it '
            f"(createdb -h {host} -p {port}{user_flag} {name}), then run {MIGRATE}."
        )
    if ("role" in lowered and "does not exist" in lowered) or "authentication failed" in lowered:
        return (
            f'PostgreSQL at {host}:{port} refused user "{user}" for database "{name}": {reason}. '
            "Check the user and password in DATABASE_URL."
        )
    if "timeout" in lowered or "timed out" in lowered:
        reason = f"no answer within {CONNECT_TIMEOUT_SECONDS} s"
    return (
        f'cannot reach PostgreSQL at {host}:{port} (database "{name}"): {reason}. '
        "Is the server running there and accepting connections, and is DATABASE_URL right?"
    )


def probe_database(settings_dict: dict[str, Any] | None = None) -> None:
    """Connect once, directly (Django's pool would wait out its own timeout
    and then report only that it timed out); raise DatabaseUnavailable with
    the explanation. SQLite has nothing to reach: settings checked its
    folder."""
    settings_dict = settings_dict or database_settings()
    if not is_postgres(settings_dict):
        return
    import psycopg

    try:
        psycopg.connect(postgres_conninfo(settings_dict)).close()
    except psycopg.Error as exc:
        raise DatabaseUnavailable(explain_connect_error(exc, settings_dict)) from exc


def migration_problem(using: str = DEFAULT_DB_ALIAS) -> str | None:
    """Why the business tables are not ready, or None."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[using])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        return f"the database has {len(plan)} unapplied migration(s): run {MIGRATE} first"
    return None


class CheckpointerUnavailable(RuntimeError):
    """The checkpointer's savers could not be opened (graphs.runtime.savers)."""
