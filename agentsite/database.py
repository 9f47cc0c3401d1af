"""Facts about Django's default database that the checkpointer, the health
probe and the start-up checks share."""

from __future__ import annotations

from typing import Any

from django.db import connections


CONNECT_TIMEOUT_SECONDS = 5


def database_settings() -> dict[str, Any]:
    # The live settings_dict, not DATABASE_URL: under test it names the test database.
    return connections["default"].settings_dict


def is_postgres(settings_dict: dict[str, Any] | None = None) -> bool:
    return "postgresql" in (settings_dict or database_settings())["ENGINE"]


def postgres_conninfo(settings_dict: dict[str, Any]) -> str:
    # Built by hand: Django's get_connection_params() carries its sync cursor
    # factory, which breaks the async saver (FIELD-NOTES).
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
