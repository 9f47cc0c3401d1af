"""README's walk-through runs as printed, in order, on a fresh server: every
shell block of README.md (but the set-up one, `make run` / `make test`,
which this test stands in for by starting a server), then the walk-through
sections README leads to — docs/api.md's "A session from start to delete"
and "History, rewind and fork", docs/agent-protocol.md's SDK example. The
shell blocks run in one bash, so what one sets (KEY, H, API, TURN) the next
uses; every curl must answer 2xx (`--fail-with-body`), every command must
succeed (`set -eu`). Only the address differs: the server listens on a free
port instead of 8000. (docs/api.md's SSE example is run, and its stream
compared, by test_readme_example.py.)"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from sessions_app.services import api_key_create
from tests.system.server import ROOT, served_database_url

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)
SETUP = "make run    # serve on http://127.0.0.1:8000\nmake test   # run the test suite\n"
WALKTHROUGH = [
    ("docs/api.md", "## A session from start to delete"),
    ("docs/api.md", "## History, rewind and fork"),
    ("docs/agent-protocol.md", "## Using it"),
]
SECONDS = 240

# Before the printed blocks: stop at the first failure, and a curl that is
# answered 4xx/5xx fails (the body still shows, for the message).
PRELUDE = """\
set -eu
curl() { command curl --fail-with-body --max-time 60 "$@"; echo; }
"""

# Runs a printed Python block with top-level await, as `python -m asyncio` does.
PYTHON_RUNNER = """\
import ast, asyncio, sys
code = compile(sys.stdin.read(), "<docs>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__"})
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""


def run_in_own_group(args: list[str], *, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    """`args` in a process group of its own, which is killed whatever
    happens (a timeout, a failed assertion): curl and manage.py children too."""
    process = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(stdin, timeout=SECONDS)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def blocks(text: str) -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in BLOCK.findall(text)]


def section(path: str, heading: str) -> str:
    text = (ROOT / path).read_text()
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def walkthrough() -> list[tuple[str, str, str]]:
    """(where, language, code) of every block the walk-through runs, in order."""
    readme = blocks((ROOT / "README.md").read_text())
    assert readme[0] == ("sh", SETUP), "README's set-up block changed: keep it as printed"
    found = [("README.md", lang, code) for lang, code in readme[1:]]
    for path, heading in WALKTHROUGH:
        found += [(f"{path} {heading}", lang, code) for lang, code in blocks(section(path, heading))]
    assert all(lang in ("sh", "python") for _, lang, _ in found), [(w, lang) for w, lang, _ in found]
    return found


def test_every_block_of_the_walkthrough_is_run():
    runs = walkthrough()
    assert [where for where, _, _ in runs].count("README.md") >= 1
    assert any(lang == "python" for _, lang, _ in runs)
    for _, lang, code in runs:
        if lang == "python":
            compile(code, "<docs>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_walkthrough_runs_as_printed_on_a_fresh_server(servers):
    # The venv the blocks name, `.venv/bin/python`: `make test` made it.
    assert (ROOT / ".venv" / "bin" / "python").exists(), "run the suite with `make test` (it creates .venv)"
    server = servers()
    address = server.url.removeprefix("http://")
    env = {
        **os.environ,
        "DATABASE_URL": served_database_url(),
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "PYTHONUNBUFFERED": "1",
    }
    shell: list[str] = [PRELUDE]
    python: list[tuple[str, str]] = []
    for where, lang, code in walkthrough():
        code = code.replace("127.0.0.1:8000", address)
        if lang == "sh":
            shell.append(f"echo '=== {where}'\n{code}")
        else:
            python.append((where, code))
    script = "\n".join(shell)
    ran = run_in_own_group(["bash", "-c", script], env=env)
    assert ran.returncode == 0, f"stdout:\n{ran.stdout}\nstderr:\n{ran.stderr}"

    key = api_key_create(owner="alice")[1]
    for where, code in python:
        ran = run_in_own_group([sys.executable, "-c", PYTHON_RUNNER], env={**env, "KEY": key}, stdin=code)
        assert ran.returncode == 0, f"{where}:\n{textwrap.indent(ran.stdout + ran.stderr, '  ')}"
