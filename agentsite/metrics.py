"""`/metrics`: the Prometheus scrape endpoint, and the pool gauges read at
scrape time (Django's pool and the checkpointer savers').

Every metric is per process: with several daphne processes, scrape each.
Off unless AGENT_METRICS_TOKEN is set, and then wants
`Authorization: Bearer <token>`. The metrics themselves are defined in
core.metrics.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from core.errors import NotFound, Unauthorized
from core.http import errors
from graphs.runtime.savers import pool_stats


class PoolCollector(Collector):
    """Connection pools, read when scraped: Django's own (PostgreSQL) and the
    checkpointer's (one per event loop, summed)."""

    def collect(self):
        size = GaugeMetricFamily(
            "agentsite_db_pool_connections", "Connections a pool holds, by state.", labels=["pool", "state"]
        )
        waiting = GaugeMetricFamily(
            "agentsite_db_pool_requests_waiting", "Requests waiting for a connection.", labels=["pool"]
        )
        pools = []
        # Read the class's dict: the `pool` property would create a pool.
        django_pool = getattr(connections["default"], "_connection_pools", {}).get("default")
        if django_pool is not None:
            pools.append(("django", [django_pool.get_stats()]))
        checkpointer = pool_stats()
        if checkpointer:
            pools.append(("checkpointer", checkpointer))
        for name, stats in pools:
            for state, key in (("max", "pool_max"), ("open", "pool_size"), ("idle", "pool_available")):
                size.add_metric([name, state], sum(s.get(key, 0) for s in stats))
            waiting.add_metric([name], sum(s.get("requests_waiting", 0) for s in stats))
        yield size
        yield waiting


REGISTRY.register(PoolCollector())


def _authorized(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.AGENT_METRICS_TOKEN
    if not token:
        return errors.response(NotFound("metrics are off: set AGENT_METRICS_TOKEN to turn them on"), request=request)
    if not _authorized(request, token):
        return errors.response(Unauthorized("send Authorization: Bearer <AGENT_METRICS_TOKEN>"), request=request)
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
