"""Prometheus metrics and the access log, recorded by one ASGI middleware.

Requests are labelled by *route template* (``/kv/v1/keys/{key}``), never by
the raw path: keys and table names in paths would make label cardinality
unbounded. Commits and conflicts are counted by the handlers that make them.

Each app owns its registry (no global default registry), so two apps in one
process, as in tests, never share counters.
"""

from __future__ import annotations

import logging
import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

access_log = logging.getLogger("lakekv.access")

# Latency buckets in seconds: a memtable get is ~0.1 ms, a commit one
# conditional PUT (1-100 ms on object storage), a big scan page longer.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class Metrics:
    """The server's counters and histograms, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "lakekv_http_requests", "HTTP requests by route, method and status code",
            ["route", "method", "code"], registry=self.registry,
        )
        self.latency = Histogram(
            "lakekv_http_request_duration_seconds", "HTTP request latency by route",
            ["route"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.commits = Counter(
            "lakekv_commits", "Successful commits by API (kv, txn, iceberg)", ["api"], registry=self.registry
        )
        self.conflicts = Counter(
            "lakekv_conflicts", "Commits rejected by a conflict, by API", ["api"], registry=self.registry
        )
        self.idempotent_replays = Counter(
            "lakekv_idempotent_replays", "Requests answered from an Idempotency-Key record", registry=self.registry
        )

    async def endpoint(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def route_template(scope: Scope) -> str:
    """The matched route's path template, or ``"unmatched"``."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class MetricsAndAccessLog:
    """Outermost middleware: times each request, counts it, logs one line."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # if the app dies before starting a response

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            elapsed = time.perf_counter() - started
            route = route_template(scope)
            self.metrics.requests.labels(route, scope["method"], str(status)).inc()
            self.metrics.latency.labels(route).observe(elapsed)
            if access_log.isEnabledFor(logging.INFO):
                client = scope.get("client") or ("-", 0)
                access_log.info(
                    '%s "%s %s" %d %.1fms', client[0], scope["method"], scope["path"], status, elapsed * 1000
                )
