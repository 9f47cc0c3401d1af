"""Fixtures shared by the whole suite. The suite runs on whichever database
DATABASE_URL names (SQLite file by default, PostgreSQL in CI's second run)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from graphs.runtime.savers import close_savers
from graphs.runtime.store import close_stores
from tests.browser import NoChromium, chromium_path
from tests.fixtures import fakes
from tests.fixtures.api import Api
from tests.fixtures.databases import FAST_COMMITS, fresh_database
from tests.fixtures.fakes import Script
from turns_app.checkpoint_tables import checkpoint_tables
from turns_app.wakeups import stop_listening

# Fixtures that tests in several folders name (never import): scratch
# PostgreSQL databases, real server processes, nginx in front of one.
pytest_plugins = ["tests.scratch_postgres", "tests.system.server", "tests.system.nginx"]


def pytest_report_header(config):
    from django.conf import settings

    return f"database: {settings.DATABASES['default']['ENGINE']}"


# Tests that wait on something built beside the run (.ci/run builds
# agent-chat-ui in the background while the passes start): run last, so a
# pass does not sit on the build's lock in its first minutes.
RUN_LAST = ("tests/agent_chat_ui/",)


@pytest.hookimpl(trylast=True)  # after pytest-django's own ordering
def pytest_collection_modifyitems(config, items):
    """Backend-specific tests are deselected (not skipped) on the other
    backend: CI runs the whole suite on both, so every one of them runs."""
    from django.conf import settings

    from core.database import is_postgres

    other = "sqlite_only" if is_postgres(settings.DATABASES["default"]) else "postgres_only"
    kept = [item for item in items if other not in item.keywords]
    dropped = [item for item in items if other in item.keywords]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    items.sort(key=lambda item: item.nodeid.startswith(RUN_LAST))  # stable: the rest keep their order
    if any("browser" in item.keywords for item in items):
        try:
            chromium_path()  # once, before any test: found, installed, or one clear line
        except NoChromium as missing:
            pytest.exit(str(missing), returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, committing without the WAL flush on
    PostgreSQL (FAST_COMMITS: tests.fixtures.databases) for the servers and
    connections the tests open."""
    if connection.vendor == "postgresql":
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(FAST_COMMITS.format(name=connection.settings_dict["NAME"]))


@pytest.fixture(autouse=True)
def _clean_checkpoints(request):
    """Django's flush knows only its models; the checkpointer's rows would
    leak from one transactional test into the next."""
    yield
    if "transactional_db" not in request.fixturenames and "live_server" not in request.fixturenames:
        return
    django_db_blocker = request.getfixturevalue("django_db_blocker")
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        for table in (*checkpoint_tables(), "store"):
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")


@pytest.fixture(autouse=True)
def _forget_cached_keys():
    """Each test's keys are its own: a row flushed by a previous test must
    not stay valid through the process's key cache."""
    from sessions_app import key_cache

    key_cache.clear()
    yield
    key_cache.clear()


@pytest.fixture(autouse=True)
async def _close_loop_savers():
    yield
    await close_stores()
    await close_savers()
    await stop_listening()


@pytest.fixture
def script(settings) -> Iterator[Script]:
    """Switch AGENT_MODEL to a scripted model for this test."""
    state = fakes.CURRENT_SCRIPT = Script()
    settings.AGENT_MODEL = "tests.fixtures.fakes:scripted_model"
    yield state
    fakes.CURRENT_SCRIPT = None


@pytest.fixture
def make_key(transactional_db) -> Callable[[str], str]:
    from sessions_app.services import api_key_create

    def make(owner: str = "alice") -> str:
        return api_key_create(owner=owner)[1]

    return make


@pytest.fixture
def alice(make_key) -> str:
    return make_key("alice")


@pytest.fixture
def bob(make_key) -> str:
    return make_key("bob")


@pytest.fixture
def api(alice) -> Api:
    return Api(alice)


@pytest.fixture
def api_bob(bob) -> Api:
    return Api(bob)


@pytest.fixture
def fresh_database_url(tmp_path) -> Iterator[tuple[str, Any]]:
    """A DATABASE_URL for an empty database on the suite's backend."""
    with fresh_database(tmp_path) as made:
        yield made
