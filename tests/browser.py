"""Headless Chromium for the browser tests: Debian's /usr/bin/chromium
(`.ci/run` installs it when missing), driven by Playwright. Playwright's own
browser downloads are never used: its wheel ships only the driver.
Playwright's sync API refuses to run inside an event loop, so tests using
this are sync."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking switches Chromium keeps dialling out,
# and this machine's closed network refuses every attempt.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch_chromium(playwright):
    """A browser, or a failure (never a skip) that says how to get Chromium."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium "
            "(apt-get update && apt-get install -y chromium; .ci/run does this)"
        )
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
