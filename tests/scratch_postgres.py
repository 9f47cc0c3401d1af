"""Scratch PostgreSQL databases for tests that need a second database (the
target of `manage.py move_sessions`), on the SQLite pass too.

The server is the one AGENT_TEST_POSTGRES_URL names, else DATABASE_URL's
when that is PostgreSQL, else the local one CI runs
(postgres://postgres@127.0.0.1:5432/postgres). Each database is created
with a unique name through an admin connection to that URL's database and
dropped after the test. PostgreSQL missing is a failure, not a skip: CI
has it on both passes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.fixtures.databases import FAST_COMMITS

DEFAULT_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
POSTGRES_SCHEMES = ("postgres://", "postgresql://")


def admin_url() -> str:
    explicit = os.environ.get("AGENT_TEST_POSTGRES_URL")
    if explicit:
        return explicit
    configured = os.environ.get("DATABASE_URL") or ""
    return configured if configured.startswith(POSTGRES_SCHEMES) else DEFAULT_ADMIN_URL


def url_for(name: str) -> str:
    parts = urlsplit(admin_url())
    return urlunsplit(parts._replace(path=f"/{name}"))


def _admin():
    import psycopg

    try:
        return psycopg.connect(admin_url(), autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"these tests need PostgreSQL at {admin_url()} (AGENT_TEST_POSTGRES_URL), also on the SQLite pass: {exc}"
        )


@pytest.fixture
def scratch_postgres() -> Iterator[Callable[[], str]]:
    """`scratch_postgres()` creates an empty database and returns its URL."""
    created: list[str] = []

    def create() -> str:
        name = f"move_{uuid.uuid4().hex[:8]}"
        with _admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
            conn.execute(FAST_COMMITS.format(name=name))
        created.append(name)
        return url_for(name)

    yield create
    if created:
        with _admin() as conn:
            for name in created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
