"""A thread stream followed on one daphne process, that process killed
(SIGKILL) in the middle of a run, the stream resumed on another process on
the same PostgreSQL database from the last `seq` the client held: the run's
failure (its lease expired) and the retry's events arrive with no gap and
no duplicate, in the order of the durable log (docs/agent-protocol.md,
"Thread streams"; docs/storage.md, "Event log")."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.fixtures.graphs import TICKS

pytestmark = [pytest.mark.system, pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

TEST_SECONDS = 180
ENV = {
    "AGENT_GRAPHS": "intake=graphs.intake.graph:build_intake_graph,ticker=tests.fixtures.graphs:build_ticker_graph",
    # The killed run's lease runs out soon, so the follower on the other process aborts it.
    "AGENT_TURN_LEASE_SECONDS": "2",
}
ALL = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input", "tasks"]
THREAD = "3b9d7e21-5a4c-4e8f-a1d2-6c0b9e8f7a15"


def headers(key: str, idempotency_key: str | None = None) -> dict[str, str]:
    return {"x-api-key": key, **({"Idempotency-Key": idempotency_key} if idempotency_key else {})}


def root_lifecycle(event: dict[str, Any]) -> str | None:
    if event["method"] == "lifecycle" and not event["params"]["namespace"]:
        return event["params"]["data"]["event"]
    return None


async def run_start(http: httpx.AsyncClient, key: str) -> dict[str, Any]:
    body = {"id": 1, "method": "run.start", "params": {"assistant_id": "ticker", "input": {"messages": []}}}
    answer = await http.post(f"/threads/{THREAD}/commands", json=body, headers=headers(key, "tick-1"))
    assert answer.status_code == 200, answer.text
    assert answer.json()["type"] == "success", answer.text
    return answer.json()["result"]


async def follow(http: httpx.AsyncClient, key: str, body: dict[str, Any], got: list[dict[str, Any]], stop) -> None:
    """Append the stream's events to `got` until `stop(got)` holds."""
    async with http.stream("POST", f"/threads/{THREAD}/stream/events", json=body, headers=headers(key)) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                got.append(json.loads(line[len("data:") :]))
                if stop(got):
                    return
    raise AssertionError(f"the stream ended early: {got}")


def ids(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["seq"], e["event_id"]) for e in events]


def ticks(events: list[dict[str, Any]]) -> int:
    return sum(1 for e in events if e["method"] == "custom")


async def test_a_stream_resumes_on_another_process_after_a_kill_mid_run(servers, alice):
    first = servers(**ENV, TICKER_HANG="1")
    second = servers(**ENV)
    async with (
        asyncio.timeout(TEST_SECONDS),
        httpx.AsyncClient(base_url=f"{first.url}/langgraph", timeout=60) as on_first,
        httpx.AsyncClient(base_url=f"{second.url}/langgraph", timeout=60) as on_second,
    ):
        started = await run_start(on_first, alice)
        seen: list[dict[str, Any]] = []
        # Followed on the process running it, until the run is in the middle of its ticks.
        await follow(on_first, alice, {"channels": ALL}, seen, lambda got: ticks(got) >= TICKS - 2)
        first.kill()
        last = seen[-1]["seq"]

        # Resumed on the other process from the last seq: the rest of the
        # killed run (its failure once its lease ran out), then the retry —
        # a run.start with the same Idempotency-Key claims a new run.
        resumed: list[dict[str, Any]] = []
        failed = asyncio.Event()

        def until_done(got: list[dict[str, Any]]) -> bool:
            if root_lifecycle(got[-1]) == "failed":
                failed.set()
            return root_lifecycle(got[-1]) == "completed"

        following = asyncio.ensure_future(
            follow(on_second, alice, {"channels": ALL, "since": last}, resumed, until_done)
        )
        await asyncio.wait([following, asyncio.ensure_future(failed.wait())], return_when=asyncio.FIRST_COMPLETED)
        assert failed.is_set(), resumed
        retried = await run_start(on_second, alice)
        assert retried["run_id"] != started["run_id"]
        await following

        # No duplicate: every event once, each after the last one held.
        assert all(e["seq"] > last for e in resumed)
        assert len({e["event_id"] for e in seen + resumed}) == len(seen) + len(resumed)
        assert ids(resumed) == sorted(ids(resumed))
        failure = next(e for e in resumed if root_lifecycle(e) == "failed")
        assert "lease" in json.dumps(failure["params"]["data"]).lower(), failure
        assert ticks(resumed) == TICKS  # the retry's ticks, all of them

        # No gap: the durable log, read from the start on the second process,
        # is what the first process showed (but what it showed and never
        # wrote before it died, which can only be its last events), then
        # exactly what the resumed stream sent.
        logged: list[dict[str, Any]] = []
        await follow(
            on_second, alice, {"channels": ALL, "since": 0}, logged, lambda got: root_lifecycle(got[-1]) == "completed"
        )
        before = [e for e in logged if e["seq"] <= last]
        assert ids(before) == ids(seen[: len(before)])
        assert all(e["seq"] > before[-1]["seq"] for e in seen[len(before) :]) if before else True
        assert ids([e for e in logged if e["seq"] > last]) == ids(resumed)
        state = (await on_second.get(f"/threads/{THREAD}/state", headers=headers(alice))).json()
        assert state["values"]["messages"][-1]["content"] == "ticked"
