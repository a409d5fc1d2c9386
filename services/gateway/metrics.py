"""The gateway's metrics: HTTP requests by route, method and status, their latency, SSE clients.

prometheus_client directly (already the mesh's metrics library) rather than an instrumentation package: the
few series below are all we need, labelled by the route *template* (``/message``, never the query or ids, so
no client can mint label values), in the registry the metrics port serves beside the gateway's gRPC metrics.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from meshcore.metrics import GO_DEFAULT_BUCKETS, PerRegistry

__all__ = ["GatewayMetrics"]


class GatewayMetrics(PerRegistry):
    """``mailmesh_gateway_*``."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        super().__init__(registry)
        self.requests = Counter(
            "mailmesh_gateway_http_requests_total",
            "HTTP requests answered, by route template, method and status code.",
            ("route", "method", "code"),
            registry=registry,
        )
        self.duration = Histogram(
            "mailmesh_gateway_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response (an SSE stream: its whole life).",
            ("route", "method"),
            buckets=GO_DEFAULT_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "mailmesh_gateway_http_requests_in_flight",
            "HTTP requests being answered (long polls and SSE streams included).",
            registry=registry,
        )
        self.sse_clients = Gauge(
            "mailmesh_gateway_sse_clients",
            "Open Server-Sent Events streams (GET /events/stream).",
            registry=registry,
        )
        self.sse_dropped = Counter(
            "mailmesh_gateway_sse_dropped_clients_total",
            "SSE clients disconnected because their buffer (GATEWAY_SSE_CLIENT_BUFFER) filled up.",
            registry=registry,
        )
        self.rejected = Counter(
            "mailmesh_gateway_rejected_total",
            "Requests refused before reaching a route, by reason (unauthenticated, rate_limited, too_large).",
            ("reason",),
            registry=registry,
        )
