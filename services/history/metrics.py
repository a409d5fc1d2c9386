"""history-query's domain metrics, with status-go's mailserver names (docs/protocol-notes.md §4.9).

Label values follow status-go: ``mailserver_delivery_failures_total{type}`` uses ``validation`` (a refused
request or cursor), ``iterator`` (the archive failed while paging) and ``process`` (anything else);
``mailserver_envelope_queries_total{filter,history}`` uses the Postgres backend's values: ``filter`` is
``partial`` for a topics query and ``full`` for a bloom one, ``history`` is ``partial`` when resuming from a
cursor and ``full`` otherwise.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from meshcore.metrics import PerRegistry

__all__ = ["BATCH_SIZE_BUCKETS", "HistoryMetrics"]

#: status-go ``prom.ExponentialBuckets(1024, 4, 10)``: 1 KiB … 256 MiB.
BATCH_SIZE_BUCKETS = tuple(float(1024 * 4**k) for k in range(10))
# prometheus.DefBuckets (status-go uses the defaults for its duration histograms).
_GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class HistoryMetrics(PerRegistry):
    """The metric set in one registry; get it with :meth:`for_registry` (a registry refuses duplicates)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.envelopes = Counter(
            "mailserver_envelopes_total",
            "Number of envelopes processed.",  # here: envelopes delivered by queries
            registry=registry,
        )
        self.delivery_attempts = Counter(
            "mailserver_delivery_attempts_total",
            "Number of Whisper envelopes processed.",  # sic: status-go's help; counts requests
            registry=registry,
        )
        self.delivery_failures = Counter(
            "mailserver_delivery_failures_total",
            "Number of requests that failed processing.",
            ("type",),
            registry=registry,
        )
        self.requests_batched = Counter(
            "mailserver_requests_batched_total",
            "Number of processed batched requests.",
            registry=registry,
        )
        self.bundle_process_duration = Histogram(
            "mailserver_requests_bundle_process_duration_seconds",
            "The time it took to process message bundles.",  # here: archive reads + bundling, not sending
            registry=registry,
            buckets=_GO_DEFAULT_BUCKETS,
        )
        self.delivery_duration = Histogram(
            "mailserver_delivery_duration_seconds",
            "Time it takes to deliver messages to a Whisper peer.",  # here: the whole Query call
            registry=registry,
            buckets=_GO_DEFAULT_BUCKETS,
        )
        self.batch_size = Histogram(
            "mailserver_sent_envelope_batch_size_bytes",
            "Size of processed Whisper envelopes in bytes.",
            registry=registry,
            buckets=BATCH_SIZE_BUCKETS,
        )
        self.envelope_queries = Counter(
            "mailserver_envelope_queries_total",
            "Number of queries for envelopes in the DB.",
            ("filter", "history"),
            registry=registry,
        )

    def failure(self, kind: str) -> None:
        """Count a failed request of ``kind`` (validation, iterator, process)."""
        self.delivery_failures.labels(kind).inc()

    def query(self, *, by_topics: bool, resumed: bool) -> None:
        """Count one archive query as status-go's Postgres backend labels it."""
        self.envelope_queries.labels(
            "partial" if by_topics else "full", "partial" if resumed else "full"
        ).inc()
