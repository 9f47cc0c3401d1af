"""Start-up trouble an operator can fix is told in one line, promptly, with a
non-zero status: settings from the environment, a PostgreSQL server that is
not there or has no such database, a typo in an SQLite path, a command run
before `migrate`. Real `manage.py` processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from tests.fixtures.databases import run

# "A few seconds": the pool behind Django's connection alone waits 10 s.
PROMPT_SECONDS = 4.0


def last_line(result) -> str:
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def assert_prompt(took: float, tmp_path: Path) -> None:
    """Prompt: within PROMPT_SECONDS of a refusal that waits for nothing (an
    unmigrated SQLite file), timed now, so a loaded machine's slow start of
    Python and Django counts on both sides and only waiting shows."""
    _, baseline = timed(["-c", "import agentsite.asgi"], f"sqlite:///{tmp_path / 'baseline.sqlite3'}")
    assert took < baseline + PROMPT_SECONDS, (took, baseline)


def timed(args: list[str], url: str, **env):
    start = time.monotonic()
    result = run(args, url, **env)
    return result, time.monotonic() - start


def assert_refused(result, *fragments: str) -> None:
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    line = last_line(result)
    assert line.startswith("agentsite: "), result.stderr
    for fragment in fragments:
        assert fragment in line, line


def pg_url(name: str, port: int | None = None) -> str:
    sd = connection.settings_dict
    user = sd.get("USER") or "postgres"
    password = f":{sd['PASSWORD']}" if sd.get("PASSWORD") else ""
    host = sd.get("HOST") or "127.0.0.1"
    return f"postgres://{user}{password}@{host}:{port or sd.get('PORT') or 5432}/{name}"


@pytest.mark.parametrize(
    "url",
    ["foo", "http://example.com/db", "postgres://user:hunter2@db:5432", "mysql://u@h/db"],
)
def test_a_bad_database_url_says_what_a_valid_one_looks_like(url):
    result, _ = timed(["manage.py", "migrate", "--noinput"], url)
    assert_refused(result, "postgres://USER:PASSWORD@HOST:5432/NAME", "sqlite:///")
    assert "hunter2" not in result.stderr  # a password never reaches the log


def test_a_sqlite_file_in_a_missing_folder_is_an_error_not_a_new_database(tmp_path):
    target = tmp_path / "typo" / "agentsite.sqlite3"
    result, _ = timed(["manage.py", "migrate", "--noinput"], f"sqlite:///{target}")
    assert_refused(result, str(target.parent), "does not exist")
    assert not target.parent.exists()


def test_a_missing_agent_data_dir_is_an_error_too(tmp_path):
    result, _ = timed(["manage.py", "migrate", "--noinput"], "", AGENT_DATA_DIR=str(tmp_path / "nowhere"))
    assert_refused(result, str(tmp_path / "nowhere"))
    assert not (tmp_path / "nowhere").exists()


def test_the_default_data_folder_is_created(tmp_path):
    """Only the default location is made on first run (a fresh clone has no
    data/): a copy of the project package whose data/ does not exist yet."""
    root = Path(__file__).resolve().parent.parent
    clone = tmp_path / "clone"
    clone.mkdir()
    # BASE_DIR comes from agentsite/'s real path and sys.path from
    # manage.py's, so those two are copied.
    shutil.copytree(root / "agentsite", clone / "agentsite", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(root / "manage.py", clone / "manage.py")
    # Every other top-level package (an app added later included), and the templates.
    packages = [p.name for p in root.iterdir() if (p / "__init__.py").is_file() and p.name != "agentsite"]
    for name in [*packages, "templates"]:
        (clone / name).symlink_to(root / name)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "AGENT_DATA_DIR"}}
    result = subprocess.run(
        [sys.executable, "manage.py", "showmigrations", "sessions_app"],
        cwd=clone,
        env={**env, "DJANGO_SETTINGS_MODULE": "agentsite.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (clone / "data").is_dir()


@pytest.mark.postgres_only
def test_unreachable_postgres_answers_fast_with_where_and_what(transactional_db, tmp_path):
    result, took = timed(["manage.py", "migrate", "--noinput"], pg_url("agentsite", port=1))
    assert_refused(result, "cannot reach PostgreSQL", ":1", '"agentsite"', "DATABASE_URL")
    assert_prompt(took, tmp_path)


@pytest.mark.postgres_only
def test_a_missing_postgres_database_says_createdb(transactional_db, tmp_path):
    name = f"agentsite_missing_{uuid.uuid4().hex[:8]}"
    host = connection.settings_dict.get("HOST") or "127.0.0.1"
    for args in (["manage.py", "migrate", "--noinput"], ["manage.py", "create_api_key", "x"]):
        result, took = timed(args, pg_url(name))
        assert_refused(result, f'no database "{name}"', f"createdb -h {host}", name, "migrate")
        assert_prompt(took, tmp_path)


@pytest.mark.postgres_only
def test_a_server_refuses_fast_when_postgres_is_unreachable(transactional_db, tmp_path):
    result, took = timed(["-c", "import agentsite.asgi"], pg_url("agentsite", port=1))
    assert_refused(result, "cannot start", "cannot reach PostgreSQL")
    assert_prompt(took, tmp_path)


@pytest.mark.parametrize("command", [["create_api_key", "alice"], ["revoke_api_key", "abc"], ["sweep_checkpoints"]])
def test_a_command_before_migrate_says_to_migrate_in_one_line(fresh_database_url, command):
    url, _ = fresh_database_url
    result, _ = timed(["manage.py", *command], url)
    assert result.stdout == ""  # nothing a `KEY=$(…)` could mistake for a key
    # README's shape, naming the Makefile's target: not Django's
    # `CommandError: …` line.
    assert_refused(result, "unapplied migration(s): run `make migrate` (or `manage.py migrate`) first")
    assert result.stderr.strip().splitlines() == [last_line(result)], result.stderr


def test_migrated_create_api_key_still_prints_only_the_key(fresh_database_url):
    url, _ = fresh_database_url
    assert run(["manage.py", "migrate", "--noinput"], url).returncode == 0
    result = run(["manage.py", "create_api_key", "alice"], url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("ask_")


@pytest.mark.postgres_only
def test_django_connection_has_a_connect_timeout():
    """Without it libpq waits for a dead host as long as the OS lets it."""
    from django.conf import settings as django_settings

    assert django_settings.DATABASES["default"]["OPTIONS"]["connect_timeout"] == 5
