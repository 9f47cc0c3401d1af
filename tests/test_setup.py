"""`manage.py migrate` installs everything, and the server refuses to start on
a database that is not ready. Each test makes a fresh database of the kind
the suite runs on (an SQLite file, or a new PostgreSQL database) and runs
the real commands in subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.databases import run
from turns_app.checkpoint_tables import POSTGRES_TABLES, SQLITE_TABLES

ROOT = Path(__file__).resolve().parent.parent


def table_names(database_url: str) -> set[str]:
    probe = run(
        [
            "-c",
            (
                "import django; django.setup(); from django.db import connection; "
                "print(','.join(connection.introspection.table_names()))"
            ),
        ],
        database_url,
    )
    assert probe.returncode == 0, probe.stderr
    return set(probe.stdout.strip().split(","))


SERVE = ["-c", "import agentsite.asgi; print('serving')"]


def test_unmigrated_database_refuses_to_start(fresh_database_url):
    url, _ = fresh_database_url
    result = run(SERVE, url)
    assert result.returncode != 0
    assert "manage.py migrate" in result.stderr
    assert "serving" not in result.stdout


def test_migrate_installs_checkpointer_tables_and_is_idempotent(fresh_database_url):
    url, _ = fresh_database_url
    first = run(["manage.py", "migrate", "--noinput"], url)
    assert first.returncode == 0, first.stderr
    assert "turns_app.0002_checkpointer_tables... OK" in first.stdout
    expected = POSTGRES_TABLES if url.startswith("postgres") else SQLITE_TABLES
    tables = table_names(url)
    assert {"agent_sessions", "agent_turns", "agent_api_keys", *expected} <= tables

    second = run(["manage.py", "migrate", "--noinput"], url)
    assert second.returncode == 0, second.stderr
    assert "No migrations to apply" in second.stdout
    assert table_names(url) == tables

    started = run(SERVE, url)
    assert started.returncode == 0, started.stderr
    assert "serving" in started.stdout


def test_the_server_freezes_what_it_loaded_before_serving(fresh_database_url):
    """The collector no longer walks the startup heap on every full
    collection (agentsite.startup.freeze_startup_heap)."""
    url, _ = fresh_database_url
    assert run(["manage.py", "migrate", "--noinput"], url).returncode == 0
    started = run(["-c", "import gc, agentsite.asgi; print(gc.get_freeze_count())"], url)
    assert started.returncode == 0, started.stderr
    assert int(started.stdout.split()[-1]) > 50_000, started.stdout


def test_checkpointer_tables_missing_refuses_to_start(fresh_database_url):
    """Business tables migrated, checkpointer tables dropped by hand: the
    server must not come up and half-work."""
    url, _ = fresh_database_url
    assert run(["manage.py", "migrate", "--noinput"], url).returncode == 0
    drop = run(
        [
            "-c",
            (
                "import django; django.setup(); from django.db import connection; "
                "c = connection.cursor(); c.execute('DROP TABLE checkpoints')"
            ),
        ],
        url,
    )
    assert drop.returncode == 0, drop.stderr
    result = run(SERVE, url)
    assert result.returncode != 0
    assert "manage.py migrate" in result.stderr


def test_second_sqlite_server_refuses_to_start(tmp_path):
    """SQLite mode is single-process; the lock is the serving process's only
    (migrate and other commands never take it)."""
    url = f"sqlite:///{tmp_path / 'one.sqlite3'}"
    assert run(["manage.py", "migrate", "--noinput"], url).returncode == 0
    first = subprocess.Popen(
        [sys.executable, "-c", "import agentsite.asgi, sys; print('up', flush=True); sys.stdin.read()"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "agentsite.settings"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline().strip() == "up"
        second = run(SERVE, url)
        assert second.returncode != 0
        assert "already serving" in second.stderr
        assert "one server process per database file" in second.stderr
        # Management commands are not servers: they still work.
        assert run(["manage.py", "migrate", "--noinput"], url).returncode == 0
    finally:
        first.stdin.close()
        first.wait(timeout=30)
    # Once the first has gone, a new server starts.
    assert run(SERVE, url).returncode == 0


def test_migrating_a_database_with_sessions_counts_each_owners_live_ones(fresh_database_url):
    """Upgrading: migration sessions_app 0005 fills in the live-session
    counts of the sessions already there, then its triggers keep them."""
    url, _ = fresh_database_url
    assert run(["manage.py", "migrate", "sessions_app", "0004", "--noinput"], url).returncode == 0
    setup = run(
        [
            "-c",
            (
                "import django; django.setup(); from django.utils import timezone; "
                "from django.db import connection; from django.db.migrations.loader import MigrationLoader; "
                # The model as it was at 0004: later migrations add columns the table does not have yet.
                "S = MigrationLoader(connection).project_state(('sessions_app', '0004_maintenance_indexes'))"
                ".apps.get_model('sessions_app', 'AgentSession'); "
                "[S.objects.create(owner='alice', key=f'a{i}') for i in range(3)]; "
                "S.objects.create(owner='bob', key='b'); "
                "S.objects.create(owner='bob', key='gone', deleted_at=timezone.now())"
            ),
        ],
        url,
    )
    assert setup.returncode == 0, setup.stderr
    assert run(["manage.py", "migrate", "--noinput"], url).returncode == 0
    probe = run(
        [
            "-c",
            (
                "import django; django.setup(); from sessions_app.models import AgentSession as S, "
                "OwnerSessionCount as C; S.objects.create(owner='bob', key='new'); "
                "print(sorted(C.objects.values_list('owner', 'live')))"
            ),
        ],
        url,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[('alice', 3), ('bob', 2)]"
