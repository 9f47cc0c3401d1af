"""The LangGraph JS SDK (@langchain/langgraph-sdk 1.8.10, the version
agent-chat-ui pins) under Node against a real daphne: stream, wait and an
interrupt's resume (tests/js/check_stream_wait_interrupt.mjs). Its packages
come from tests/js/package-lock.json (`npm ci`); `.ci/run` provides Node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

JS = Path(__file__).resolve().parents[1] / "js"
INSTALL_SECONDS = 300
RUN_SECONDS = 120


def installed() -> Path:
    """tests/js/node_modules from the lockfile, installed when missing or
    older than the lockfile."""
    npm = shutil.which("npm")
    assert npm and shutil.which("node"), "Node.js and npm are required (.ci/run installs them)"
    stamp = JS / "node_modules" / ".package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < (JS / "package-lock.json").stat().st_mtime:
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, timeout=INSTALL_SECONDS)
    return JS


def test_js_sdk_streams_waits_and_resumes_an_interrupt(servers, alice):
    server = servers(AGENT_OFFLINE_TOKEN_DELAY_MS="10")
    done = subprocess.run(
        [shutil.which("node"), "check_stream_wait_interrupt.mjs"],
        cwd=installed(),
        env={**os.environ, "LANGGRAPH_URL": f"{server.url}/langgraph", "API_KEY": alice},
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    assert done.returncode == 0, done.stderr + server.log_text()[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["info_ok"] is True
    assert seen["events"][0] == "metadata" and seen["events"][-1] == "end"
    assert {"values", "messages"} <= set(seen["events"])
    ids = [int(i) for i in seen["ids"]]
    assert ids == sorted(set(ids))
    assert seen["run_created"] == {"run_id": seen["metadata"]["run_id"], "thread_id": seen["thread_id"]}
    assert seen["streamed_reply"] == seen["reply"] and seen["reply"]
    assert seen["wait_equals_state"] is True
    # A checkpoint per step: each run's input, then after `__start__`, `extract` and `reply`.
    assert seen["history_sources"] == [*["loop"] * 3, "input", *["loop"] * 3, "input", "input"]
    [interrupt] = seen["interrupt"]
    assert interrupt["value"]["action_requests"][0]["name"] == "book_table" and interrupt["id"]
    assert seen["thread_status"] == "interrupted"
    assert "BK-" in seen["resumed_reply"]
    assert seen["missing"] == 404
