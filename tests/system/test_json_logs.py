"""LOG_FORMAT=json: every line a real daphne writes is one JSON object (its
access log included), and every turn's start and end carry turn_id,
session, owner and, for an aborted turn, its error code."""

from __future__ import annotations

import json

import httpx
import pytest

from sessions_app.services import api_key_create

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]


def json_lines(text: str) -> list[dict]:
    records = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("--- "):  # the test harness's own header
            continue
        records.append(json.loads(line))  # a line that is not JSON fails here
    return records


def turn_records(records: list[dict], turn_id: str) -> dict[str, dict]:
    return {r["event"]: r for r in records if r.get("turn_id") == turn_id and "event" in r}


def test_turns_are_logged_as_json_lines(servers):
    server = servers(LOG_FORMAT="json")
    key = api_key_create(owner="alice")[1]
    headers = {"Authorization": f"Bearer {key}"}
    committed = httpx.post(
        f"{server.url}/api/sessions/logged/turns", json={"text": "hello"}, headers=headers, timeout=30
    )
    assert committed.status_code == 200
    committed_id = committed.json()["turn_id"]
    streamed = httpx.post(
        f"{server.url}/api/sessions/logged/turns/stream", json={"text": "Ada Lovelace"}, headers=headers, timeout=30
    )
    assert "event: done" in streamed.text

    # A model slower than the time limit: the turn aborts with model_timeout.
    server.restart(AGENT_OFFLINE_TOKEN_DELAY_MS="200", AGENT_MODEL_TIMEOUT_SECONDS="0.3")
    failed = httpx.post(f"{server.url}/api/sessions/slow/turns", json={"text": "hello"}, headers=headers, timeout=30)
    assert failed.status_code == 504
    (failed_turn,) = httpx.get(f"{server.url}/api/sessions/slow/turns", headers=headers).json()
    server.stop()

    records = json_lines(server.log_text())
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert any(r["logger"] == "daphne.access" and r.get("status") == 200 for r in records)

    done = turn_records(records, committed_id)
    assert set(done) == {"turn_started", "turn_ended"}
    for record in done.values():
        assert record["session"] == "logged" and record["owner"] == "alice"
        assert record["session_id"] and record["number"] == 1
    assert done["turn_ended"]["outcome"] == "committed"
    assert done["turn_ended"]["code"] is None
    assert done["turn_ended"]["duration_ms"] > 0

    aborted = turn_records(records, failed_turn["id"])
    assert set(aborted) == {"turn_started", "turn_ended"}
    assert aborted["turn_ended"]["outcome"] == "aborted"
    assert aborted["turn_ended"]["code"] == "model_timeout"
    assert aborted["turn_ended"]["level"] == "WARNING"
    assert aborted["turn_ended"]["session"] == "slow" and aborted["turn_ended"]["owner"] == "alice"
    # Two turns on "logged" (JSON and stream), one on "slow": each started and ended.
    starts = [r for r in records if r.get("event") == "turn_started"]
    ends = [r for r in records if r.get("event") == "turn_ended"]
    assert len(starts) == len(ends) == 3
