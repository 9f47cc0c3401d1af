"""The SSE example of docs/api.md ("Streaming (SSE)"), run as printed on a
fresh session against a real server: the request is read from the doc's
`curl` line, and the stream must match the doc's event block exactly — every
id, event name and data line — except the turn id (the doc shows
`3cd4ae23-…`) and the deltas the doc elides with its "…" line."""

from __future__ import annotations

import itertools
import json
import re
import shlex
from pathlib import Path

import httpx
import pytest

from sessions_app.services import api_key_create

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
UUID_PLACEHOLDER = re.compile(r"[0-9a-f]{8}-…")
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def streaming_section() -> str:
    text = DOC.read_text()
    start = text.index("## Streaming (SSE)")
    return text[start : text.index("\n## ", start + 1)]


def readme_request(section: str) -> tuple[dict[str, str], str, dict[str, str], str]:
    """(environment of the `make run` line, path, headers, body) of the example."""
    shell = re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1)
    run_line, *curl_lines = [line for line in shell.replace("\\\n", " ").splitlines() if line.strip()]
    env = dict(word.split("=", 1) for word in shlex.split(run_line.split("#")[0]) if "=" in word)
    words = shlex.split(" ".join(curl_lines))
    path = next(w for w in words if w.startswith("$API/")).removeprefix("$API")
    headers = {}
    for flag, value in itertools.pairwise(words):
        if flag == "-H" and value != "$H":
            name, _, header_value = value.partition(": ")
            headers[name] = header_value
    body = words[words.index("-d") + 1]
    return env, path, headers, body


def readme_events(section: str) -> tuple[list[str], list[str]]:
    """The event blocks the doc prints before and after its elision line."""
    block = re.search(r"```text\n(.*?)```", section, re.DOTALL).group(1)
    before: list[str] = []
    after: list[str] = []
    elided = False
    for chunk in block.strip().split("\n\n"):
        if chunk.strip().startswith("…"):
            elided = True
            continue
        (after if elided else before).append(chunk.strip())
    return before, after


def as_pattern(printed: str) -> re.Pattern[str]:
    """The doc's event text, literally, with `xxxxxxxx-…` standing for a UUID."""
    parts = UUID_PLACEHOLDER.split(printed)
    return re.compile(UUID.join(re.escape(part) for part in parts))


def test_the_docs_sse_example_reproduces_on_a_fresh_session(servers):
    section = streaming_section()
    env, path, headers, body = readme_request(section)
    assert path == "/sessions/demo-2/turns/stream" and json.loads(body)["text"]
    server = servers(**env)
    key = api_key_create(owner="alice")[1]

    response = httpx.post(
        f"{server.url}/api{path}",
        content=body,
        headers={"Authorization": f"Bearer {key}", **headers},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    received = [chunk.strip() for chunk in response.text.strip().split("\n\n")]
    received = [chunk for chunk in received if not chunk.startswith(":")]

    before, after = readme_events(section)
    assert len(received) >= len(before) + len(after)
    shown = list(zip(before, received[: len(before)], strict=True)) + list(
        zip(after, received[-len(after) :], strict=False)
    )
    for printed, got in shown:
        assert as_pattern(printed).fullmatch(got), f"docs/api.md:\n{printed}\n\nserver:\n{got}"
    # What the doc elides is deltas, with the ids in between.
    middle = received[len(before) : len(received) - len(after)]
    assert all("\nevent: delta\n" in chunk for chunk in middle), middle
    ids = [int(chunk.split("\n", 1)[0].removeprefix("id: ")) for chunk in received]
    assert ids == list(range(1, len(received) + 1))
