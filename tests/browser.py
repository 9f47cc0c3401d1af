"""Headless Chromium for the browser tests, driven by Playwright.

Which Chromium: the `CHROMIUM` environment variable if set; else the first
of the usual places (Debian's /usr/bin/chromium, which `.ci/run` installs,
and the other distributions' names); else Playwright's own build, installed
with `python -m playwright install chromium` when it is missing; else the
run stops with one line naming both ways. The tests marked `browser` ask
for it once, before any test runs (tests/conftest.py), so a machine without
Chromium stops at once instead of failing test after test.

Playwright's sync API refuses to run inside an event loop, so tests using
this are sync."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

USUAL_PATHS = (
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
    "/usr/bin/google-chrome-stable",
    "/snap/bin/chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
)
INSTALL_SECONDS = 600
HOW_TO_GET_ONE = (
    "install Chromium (Debian: apt-get install -y chromium; .ci/run does this) or point "
    "CHROMIUM=/path/to/chrome at one, or let Playwright fetch its own: "
    ".venv/bin/python -m playwright install chromium"
)
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


class NoChromium(RuntimeError):
    pass


def playwright_chromium() -> Path:
    """Where Playwright keeps its own Chromium (whether or not it is there)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        return Path(playwright.chromium.executable_path)


def install_playwright_chromium() -> bool:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "playwright", "install", "chromium"],
            timeout=INSTALL_SECONDS,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def find_chromium(
    *,
    environ=os.environ,
    usual_paths=USUAL_PATHS,
    bundled=playwright_chromium,
    install=install_playwright_chromium,
) -> str:
    configured = environ.get("CHROMIUM", "").strip()
    if configured:
        if not os.access(configured, os.X_OK):
            raise NoChromium(
                f"CHROMIUM={configured} is not an executable file: fix it, or unset it and {HOW_TO_GET_ONE}"
            )
        return configured
    for path in usual_paths:
        if os.access(path, os.X_OK):
            return path
    own = bundled()
    if own.exists() or (install() and own.exists()):
        return str(own)
    raise NoChromium(f"no Chromium for the browser tests: {HOW_TO_GET_ONE}")


@cache
def chromium_path() -> str:
    return find_chromium()


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)


def send_chat_message(page, text: str) -> None:
    """Type a message into the chat page (templates/chat.html) and send it."""
    page.fill("#message", text)
    page.click("#send")


def artifacts_dir() -> Path:
    """Where browser tests keep their screenshots: a folder per database,
    because .ci/run's two passes run side by side in one checkout and each
    test removes its screenshot before taking it again (one pass removed the
    other's before it was read back)."""
    from django.conf import settings

    from core.database import is_postgres

    kind = "postgresql" if is_postgres(settings.DATABASES["default"]) else "sqlite"
    return Path(settings.BASE_DIR) / "artifacts" / kind
