"""agent-chat-ui (tests/vendor/agent-chat-ui, upstream's files unmodified)
installed and built once into build/agent-chat-ui/, for the browser test
that drives it (tests/agent_chat_ui/test_agent_chat_ui_browser.py).

`python -m tests.agent_chat_ui.build` builds it; .ci/run does so before the
two test passes start, and the test calls `built()`, which builds only when
the build is missing or older than the vendored files. An exclusive lock on
build/agent-chat-ui.lock makes two passes (or two `make test`s) take turns:
the second waits and then finds the build done.

The install is upstream's own: pnpm (the version upstream's package.json
names, fetched by npx from the npm registry) from upstream's pnpm-lock.yaml
with --frozen-lockfile, so the packages are exactly the ones upstream pins.
`next build` fetches the Inter font from Google Fonts; Next.js reads the
answers from google-fonts-mock.cjs instead (NEXT_FONT_GOOGLE_MOCKED_RESPONSES),
so the build needs no network but the npm registry. NEXT_PUBLIC_* settings are
left unset at build time: Next.js would inline them, and one build serves
every test through the UI's own `?apiUrl=…&assistantId=…` parameters."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "vendor" / "agent-chat-ui"
FONTS_MOCK = Path(__file__).resolve().parent / "google-fonts-mock.cjs"
BUILD = ROOT / "build" / "agent-chat-ui"
LOCK = ROOT / "build" / "agent-chat-ui.lock"
STAMP_NAME = ".agentsite-build"
PNPM = "pnpm@10.5.1"  # upstream's package.json "packageManager"
INSTALL_SECONDS = 900
BUILD_SECONDS = 1200


def fingerprint() -> str:
    """What the build is made of: every vendored file, the font answers and
    this builder."""
    digest = hashlib.sha256()
    for path in sorted(p for p in SOURCE.rglob("*") if p.is_file()):
        digest.update(path.relative_to(SOURCE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for path in (FONTS_MOCK, Path(__file__).resolve()):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def is_current(wanted: str) -> bool:
    stamp = BUILD / STAMP_NAME
    return stamp.is_file() and stamp.read_text().strip() == wanted and (BUILD / ".next" / "BUILD_ID").is_file()


def run(command: list[str], *, timeout: float) -> None:
    env = {**os.environ, "NEXT_TELEMETRY_DISABLED": "1", "NEXT_FONT_GOOGLE_MOCKED_RESPONSES": str(FONTS_MOCK)}
    for name in [n for n in env if n.startswith("NEXT_PUBLIC_")]:
        del env[name]
    print(f"agent-chat-ui: {' '.join(command)}", flush=True)
    subprocess.run(command, cwd=BUILD, env=env, check=True, timeout=timeout)


def build(wanted: str) -> None:
    npx = shutil.which("npx")
    assert npx and shutil.which("node"), "Node.js and npm are required (.ci/run installs them)"
    if BUILD.exists():
        shutil.rmtree(BUILD)
    shutil.copytree(SOURCE, BUILD)
    started = time.monotonic()
    run(
        [npx, "--yes", PNPM, "install", "--frozen-lockfile", "--reporter=append-only"],
        timeout=INSTALL_SECONDS,
    )
    installed = time.monotonic()
    # Linting is upstream's development check, not part of what runs.
    run([str(BUILD / "node_modules" / ".bin" / "next"), "build", "--no-lint"], timeout=BUILD_SECONDS)
    (BUILD / STAMP_NAME).write_text(wanted + "\n")
    print(
        f"agent-chat-ui: installed in {installed - started:.0f} s, built in {time.monotonic() - installed:.0f} s",
        flush=True,
    )


def built() -> Path:
    """The build directory, built first if it is missing or stale."""
    wanted = fingerprint()
    if is_current(wanted):
        return BUILD
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if not is_current(wanted):
            build(wanted)
    return BUILD


if __name__ == "__main__":
    try:
        print(f"agent-chat-ui: ready in {built()}")
    except (subprocess.SubprocessError, AssertionError, OSError) as failed:
        print(f"agent-chat-ui: build failed: {failed}", file=sys.stderr)
        sys.exit(1)
