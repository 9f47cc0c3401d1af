"""tests/browser.py finds a Chromium for the browser tests: CHROMIUM, then
the usual paths, then Playwright's own (installed when missing), else one
clear line naming both ways. And a run that selects a browser test stops at
once, with that line, when there is none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import NoChromium, find_chromium

ROOT = Path(__file__).resolve().parent.parent


def executable(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def never_bundled() -> Path:
    return Path("/nonexistent/playwright/chrome")


def test_the_chromium_setting_comes_first(tmp_path):
    mine = executable(tmp_path / "my-chrome")
    usual = executable(tmp_path / "usual-chrome")
    assert find_chromium(environ={"CHROMIUM": mine}, usual_paths=(usual,), bundled=never_bundled) == mine


def test_a_bad_chromium_setting_is_an_error_not_a_fallback(tmp_path):
    usual = executable(tmp_path / "usual-chrome")
    with pytest.raises(NoChromium) as raised:
        find_chromium(environ={"CHROMIUM": str(tmp_path / "typo")}, usual_paths=(usual,))
    assert "CHROMIUM=" in str(raised.value) and "typo" in str(raised.value)


def test_the_usual_paths_in_order(tmp_path):
    second = executable(tmp_path / "second")
    paths = (str(tmp_path / "missing"), second)
    assert find_chromium(environ={}, usual_paths=paths, bundled=never_bundled) == second


def test_playwrights_own_is_installed_when_nothing_else_is_there(tmp_path):
    own = tmp_path / "ms-playwright" / "chrome"
    installs = []

    def install() -> bool:
        installs.append(1)
        own.parent.mkdir()
        executable(own)
        return True

    found = find_chromium(environ={}, usual_paths=(), bundled=lambda: own, install=install)
    assert found == str(own) and installs == [1]
    # Once there, it is used without installing again.
    assert find_chromium(environ={}, usual_paths=(), bundled=lambda: own, install=lambda: 1 / 0) == str(own)


def test_nothing_found_and_no_install_names_both_ways(tmp_path):
    with pytest.raises(NoChromium) as raised:
        find_chromium(environ={}, usual_paths=(), bundled=never_bundled, install=lambda: False)
    message = str(raised.value)
    assert "\n" not in message
    assert "apt-get install -y chromium" in message and "CHROMIUM=" in message
    assert "playwright install chromium" in message


def test_a_run_with_browser_tests_stops_at_once_without_chromium(tmp_path):
    """A real pytest run on a machine with no Chromium: the CHROMIUM setting
    points nowhere, so it stops before any test with the one line."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/system/test_admin_debug_off.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CHROMIUM": str(tmp_path / "no-chrome-here")},
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "no-chrome-here is not an executable file" in result.stdout + result.stderr
    assert "passed" not in result.stdout and "failed" not in result.stdout
