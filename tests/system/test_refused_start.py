"""A server that must not serve exits promptly, non-zero, with the one-line
reason last: under `manage.py runserver` (its autoreloader loads the app on a
thread, where an exception used to print a traceback and leave the process
hanging, not listening), under daphne, and under `make run`."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.fixtures.databases import run
from tests.system.server import BIN, ROOT, free_port

pytestmark = pytest.mark.system

# A ceiling, not a target: start-up is a few seconds, tens on a loaded
# machine; a refusal that hangs runs into it.
PROMPT_SECONDS = 120.0
MAKE_STATUS = re.compile(r"make(\[\d+\])?: ")


def command(kind: str, port: int) -> list[str]:
    if kind == "runserver":  # with the autoreloader, as `make run` runs it
        return [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}"]
    if kind == "make run":
        return ["make", "--no-print-directory", "run", "HOST=127.0.0.1", f"PORT={port}"]
    return [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "agentsite.asgi:application"]


def end_group(process: subprocess.Popen) -> None:
    """SIGKILL to the process group it leads: a runserver's child, or make's,
    must not outlive the test."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(30)


def start_refused(kind: str, url: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "agentsite.settings"}
    started = time.monotonic()
    process = subprocess.Popen(
        command(kind, free_port()),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=PROMPT_SECONDS)
    except subprocess.TimeoutExpired:
        end_group(process)
        stdout, stderr = process.communicate()
        pytest.fail(f"{kind} was still running after {PROMPT_SECONDS} s:\n{printed(stdout)}\n{printed(stderr)}")
    finally:
        end_group(process)
    result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    return result, time.monotonic() - started


def printed(output: bytes | str | None) -> str:
    """What a timed-out process had printed: bytes, even under text=True."""
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def assert_refused(result: subprocess.CompletedProcess, reason: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    # make adds its own "make: *** … Error 1" ("make[1]: …" under another
    # make, as in `make test`) after the program's last line.
    lines = [line for line in result.stderr.splitlines() if line.strip() and not MAKE_STATUS.match(line)]
    assert lines and lines[-1].startswith("agentsite: cannot start: "), output
    assert reason in lines[-1], lines[-1]


@pytest.mark.parametrize("kind", ["runserver", "daphne"])
def test_an_unmigrated_database(kind, fresh_database_url):
    url, _ = fresh_database_url
    result, _ = start_refused(kind, url)
    assert_refused(result, "run `make migrate` (or `manage.py migrate`) first")


@pytest.mark.parametrize("kind", ["runserver", "daphne"])
def test_missing_checkpointer_tables(kind, fresh_database_url):
    url, _ = fresh_database_url
    assert run(["manage.py", "migrate", "--noinput"], url).returncode == 0
    drop = run(
        [
            "-c",
            (
                "import django; django.setup(); from django.db import connection; "
                "connection.cursor().execute('DROP TABLE checkpoints')"
            ),
        ],
        url,
    )
    assert drop.returncode == 0, drop.stderr
    result, _ = start_refused(kind, url)
    assert_refused(result, "the checkpointer's tables (checkpoints) are missing")


@pytest.mark.sqlite_only
@pytest.mark.parametrize("kind", ["runserver", "daphne", "make run"])
def test_a_second_server_on_one_sqlite_file(kind, tmp_path):
    url = f"sqlite:///{tmp_path / 'one.sqlite3'}"
    assert run(["manage.py", "migrate", "--noinput"], url).returncode == 0
    first = subprocess.Popen(
        [sys.executable, "-c", "import agentsite.asgi, sys; print('up', flush=True); sys.stdin.read()"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "agentsite.settings"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert first.stdout.readline().strip() == "up"
        result, _took = start_refused(kind, url)
        assert_refused(result, f"(pid {first.pid}) is already serving")
        # Refused before anything touched the live server's file, and before
        # it said where it would serve.
        output = result.stdout + result.stderr
        assert "Operations to perform" not in output and "migrate" not in result.stdout, output
        assert "Starting" not in output, output
    finally:
        first.stdin.close()
        end_group(first)
