"""Prometheus metrics (prometheus-client); `/metrics` (agentsite.metrics) serves them.

Every metric is per process: with several daphne processes, scrape each.
The turn metrics are fed by turns_app.observability; the model-call timer is
a LangChain callback on the chat model (graphs.runtime.chat_models); session-busy
waits by core.asyncdb; pool usage is read at scrape time.

`/metrics` is off unless AGENT_METRICS_TOKEN is set, and then wants
`Authorization: Bearer <token>`.
"""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from prometheus_client import Counter, Gauge, Histogram

# Turns take seconds (a model call); first tokens come sooner.
TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
FIRST_DELTA_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)

TURNS = Counter(
    "agentsite_turns",
    "Turns by outcome: committed, aborted (with the error code), replayed (an Idempotency-Key retry).",
    ["outcome", "code"],
)
TURN_SECONDS = Histogram(
    "agentsite_turn_duration_seconds",
    "From the claim to the commit or abort, by outcome.",
    ["outcome"],
    buckets=TURN_BUCKETS,
)
FIRST_DELTA_SECONDS = Histogram(
    "agentsite_turn_first_delta_seconds",
    "From the claim to the first token of the reply.",
    buckets=FIRST_DELTA_BUCKETS,
)
MODEL_CALL_SECONDS = Histogram(
    "agentsite_model_call_seconds",
    "One chat-model call, by result (ok or error).",
    ["result"],
    buckets=TURN_BUCKETS,
)
ACTIVE_TURNS = Gauge("agentsite_turns_active", "Turns running in this process.")
SESSION_BUSY_WAITS = Counter(
    "agentsite_session_busy_waits",
    "Chats that found their session busy and waited: acquired it, or gave up (session_busy).",
    ["result"],
)
SESSION_BUSY_WAIT_SECONDS = Histogram(
    "agentsite_session_busy_wait_seconds",
    "How long a chat waited for a busy session.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)

MAINTENANCE_RUNS = Counter(
    "agentsite_maintenance_runs", "Periodic maintenance passes run by this process, by result.", ["result"]
)
MAINTENANCE_ITEMS = Counter(
    "agentsite_maintenance_items",
    "What maintenance did: turns expired, events compacted, threads dropped, sessions expired, tombstones removed.",
    ["kind"],
)


def session_busy_wait(started: float, *, acquired: bool) -> None:
    SESSION_BUSY_WAITS.labels(result="acquired" if acquired else "gave_up").inc()
    SESSION_BUSY_WAIT_SECONDS.observe(time.monotonic() - started)


class ModelCallTimer(BaseCallbackHandler):
    """Times every call of the chat model it is attached to, whatever graph
    or node makes it."""

    run_inline = True  # a dict operation: no executor hop

    def __init__(self) -> None:
        self._started: dict[UUID, float] = {}

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._started[run_id] = time.monotonic()

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._started[run_id] = time.monotonic()

    def _done(self, run_id: UUID, result: str) -> None:
        started = self._started.pop(run_id, None)
        if started is not None:
            MODEL_CALL_SECONDS.labels(result=result).observe(time.monotonic() - started)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._done(run_id, "ok")

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._done(run_id, "error")


MODEL_CALLS = ModelCallTimer()
