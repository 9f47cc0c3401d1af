"""The periodic maintenance runs inside real daphne processes (no cron): a
turn whose lease ran out is aborted with no request touching its session;
on PostgreSQL only one of two processes does the work (an advisory lock),
and the other takes over when that one dies."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.runners import run_in_new_loop
from tests.fixtures.turns import claim_turn
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

TOKEN = "maintenance-test-token"
FAST = {"AGENT_MAINTENANCE_INTERVAL_SECONDS": "0.3", "AGENT_METRICS_TOKEN": TOKEN}


def runs(server) -> float:
    text = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "agentsite_maintenance_runs_total" and sample.labels == {"result": "ok"}:
                return sample.value
    return 0.0


def wait_for(condition, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def dead_turn(key: str, settings):
    """A pending turn whose lease has already run out, as a crashed process leaves it."""
    settings.AGENT_TURN_LEASE_SECONDS = 0.05
    claim = run_in_new_loop(lambda: claim_turn(key, "hello"))
    time.sleep(0.1)
    return claim.turn_id


def status(turn_id) -> str:
    return AgentTurn.objects.get(pk=turn_id).status


def test_the_server_aborts_a_dead_lease_by_itself(servers, settings):
    server = servers(**FAST)
    turn_id = dead_turn("crashed-elsewhere", settings)
    assert wait_for(lambda: status(turn_id) == AgentTurn.Status.ABORTED), server.log_text()
    assert AgentTurn.objects.get(pk=turn_id).error["code"] == "lease_expired"
    assert runs(server) >= 1


def test_maintenance_is_off_with_interval_zero(servers, settings):
    server = servers(AGENT_MAINTENANCE_INTERVAL_SECONDS="0", AGENT_METRICS_TOKEN=TOKEN)
    turn_id = dead_turn("left-alone", settings)
    time.sleep(1.5)
    assert status(turn_id) == AgentTurn.Status.PENDING
    assert runs(server) == 0


@pytest.mark.postgres_only
def test_one_process_maintains_and_another_takes_over(servers, settings):
    first = servers(**FAST)
    second = servers(**FAST)
    assert wait_for(lambda: runs(first) + runs(second) >= 3)
    time.sleep(1.0)  # several more ticks of both
    counts = {server: runs(server) for server in (first, second)}
    leader = max(counts, key=counts.get)
    other = first if leader is second else second
    assert counts[leader] >= 3 and counts[other] == 0, counts

    turn_id = dead_turn("crashed-a", settings)
    assert wait_for(lambda: status(turn_id) == AgentTurn.Status.ABORTED)
    assert runs(other) == 0

    leader.kill()  # its lock connection goes with it
    assert wait_for(lambda: runs(other) >= 2), other.log_text()
    turn_id = dead_turn("crashed-b", settings)
    assert wait_for(lambda: status(turn_id) == AgentTurn.Status.ABORTED)
    assert "this process leads" in other.log_text()
