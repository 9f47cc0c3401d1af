"""Prometheus metrics at /metrics: off by default, behind a token, and a
turn moves the counters (committed, aborted by code, replayed), the
histograms (duration, first delta, model call), the busy-session waits and,
on PostgreSQL, the pool gauges."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.test import AsyncClient
from prometheus_client.parser import text_string_to_metric_families

from agentsite.routing import build_application
from tests.fixtures.api import Api
from tests.turns_app.test_sse_consumer import post, stream_events

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-test-token"


async def scrape() -> dict[tuple[str, frozenset], float]:
    response = await AsyncClient().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before, after, name: str, **labels) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.fixture
def metrics_on(settings):
    settings.AGENT_METRICS_TOKEN = TOKEN


async def test_metrics_are_off_by_default(settings):
    settings.AGENT_METRICS_TOKEN = ""
    response = await AsyncClient().get("/metrics")
    assert response.status_code == 404
    assert json.loads(response.content)["error"]["code"] == "not_found"


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
async def test_metrics_want_the_token(metrics_on, header):
    headers = {"Authorization": header} if header else {}
    response = await AsyncClient().get("/metrics", headers=headers)
    assert response.status_code == 401
    assert json.loads(response.content)["error"]["code"] == "unauthorized"


async def test_a_turn_moves_the_counters(metrics_on, api: Api):
    before = await scrape()
    first = await api.chat("metrics-1", "hello", idem="m-1")
    assert first.status_code == 200
    after = await scrape()
    assert moved(before, after, "agentsite_turns_total", outcome="committed", code="") == 1
    assert moved(before, after, "agentsite_turn_duration_seconds_count", outcome="committed") == 1
    # A JSON turn streams no tokens: no first delta to time.
    assert moved(before, after, "agentsite_turn_first_delta_seconds_count") == 0
    # The intake graph calls the model twice: field extraction, then the reply.
    assert moved(before, after, "agentsite_model_call_seconds_count", result="ok") == 2
    assert value(after, "agentsite_turns_active") == 0

    replayed = await api.chat("metrics-1", "hello", idem="m-1")
    assert replayed.status_code == 200 and replayed["Idempotent-Replayed"] == "true"
    again = await scrape()
    assert moved(after, again, "agentsite_turns_total", outcome="replayed", code="") == 1
    assert moved(after, again, "agentsite_turns_total", outcome="committed", code="") == 0
    assert moved(after, again, "agentsite_model_call_seconds_count", result="ok") == 0

    streamed = await stream_events(post(build_application(), api.key, "metrics-1", text="Ada Lovelace"))
    assert streamed[-1].event == "done"
    assert moved(again, await scrape(), "agentsite_turn_first_delta_seconds_count") == 1


async def test_an_aborted_turn_is_counted_by_its_code(metrics_on, api: Api, script):
    script.fail["reply"] = RuntimeError("the provider is down")
    before = await scrape()
    response = await api.chat("metrics-2", "hello")
    assert response.status_code == 502
    after = await scrape()
    assert moved(before, after, "agentsite_turns_total", outcome="aborted", code="model_error") == 1
    assert moved(before, after, "agentsite_turn_duration_seconds_count", outcome="aborted") == 1
    assert moved(before, after, "agentsite_model_call_seconds_count", result="error") == 1
    assert moved(before, after, "agentsite_turns_total", outcome="committed", code="") == 0


async def test_busy_session_waits_are_counted(metrics_on, api: Api, script, settings):
    settings.AGENT_SESSION_WAIT_SECONDS = 10
    script.gate = threading.Event()
    before = await scrape()
    first = asyncio.ensure_future(api.chat("metrics-3", "hello"))
    await asyncio.to_thread(script.reply_started.wait, 10)
    during = await scrape()
    assert value(during, "agentsite_turns_active") == 1
    second = asyncio.ensure_future(api.chat("metrics-3", "Ada Lovelace"))
    await asyncio.sleep(0.3)  # the second is waiting for the session now
    script.gate.set()
    assert (await first).status_code == 200
    assert (await second).status_code == 200
    acquired = await scrape()
    assert moved(before, acquired, "agentsite_session_busy_waits_total", result="acquired") == 1
    assert moved(before, acquired, "agentsite_session_busy_wait_seconds_count") == 1
    assert moved(before, acquired, "agentsite_session_busy_wait_seconds_sum") >= 0.2

    settings.AGENT_SESSION_WAIT_SECONDS = 0.2
    script.gate = threading.Event()
    script.reply_started.clear()
    held = asyncio.ensure_future(api.chat("metrics-3", "my email is ada@example.com"))
    await asyncio.to_thread(script.reply_started.wait, 10)
    refused = await api.chat("metrics-3", "party size: 3")
    assert refused.status_code == 409
    script.gate.set()
    assert (await held).status_code == 200
    gave_up = await scrape()
    assert moved(acquired, gave_up, "agentsite_session_busy_waits_total", result="gave_up") == 1


@pytest.mark.postgres_only
async def test_pool_usage_is_exported(metrics_on, api: Api, settings):
    assert (await api.chat("metrics-4", "hello")).status_code == 200
    samples = await scrape()
    max_size = settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"]
    assert value(samples, "agentsite_db_pool_connections", pool="django", state="max") == max_size
    assert (
        value(samples, "agentsite_db_pool_connections", pool="checkpointer", state="max") == settings.AGENT_DB_POOL_SIZE
    )
    assert value(samples, "agentsite_db_pool_connections", pool="checkpointer", state="open") >= 1
    assert ("agentsite_db_pool_requests_waiting", frozenset({("pool", "django")})) in samples
