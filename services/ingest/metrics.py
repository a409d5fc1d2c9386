"""The ingest service's domain metrics, declared in one place (status-go names where they exist;
protocol-notes §4.9).

status-go semantics kept (``waku/waku.go`` ``addAndBridge`` and ``handleMessagesCode``):

- ``waku_envelopes_received_total``: every envelope that arrives (malformed ones included);
- ``waku_envelopes_validated_total``: every envelope that went through the checks (decoded), whatever the
  verdict — status-go increments it after ``add()`` for each envelope of a packet;
- ``waku_envelopes_cache_failures_total{type}``: one per failed status-go check (``in_future``, ``very_old``,
  ``expired``, ``oversized``, ``low_pow``);
- ``waku_envelopes_cached_total{cache}``: ``hit`` for a duplicate ingest already knew (no write), ``miss`` for
  an envelope handed to the archive;
- ``waku_envelopes_size_bytes``: ``20 + len(Data)`` of each miss, status-go's buckets (256 × 4^k, 10).

Mailmesh's own: ``waku_envelopes_rejected_total{reason}`` counts every refused envelope by
:class:`~services.ingest.model.Fault` value (status-go uses it for packet-level failures, which ingest never
sees); ``mailserver_envelopes_total`` counts envelopes the archive newly stored; ``ingest_*`` describe the
write batcher.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from services.ingest.model import STATUS_GO_FAULTS, Fault

__all__ = ["IngestMetrics"]

_SIZE_BUCKETS = tuple(float(256 * 4**k) for k in range(10))  # prom.ExponentialBuckets(256, 4, 10)
_WRITE_SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)
_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class IngestMetrics:
    """Every domain metric of the ingest service, bound to one registry (tests pass a private one)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.received = Counter(
            "waku_envelopes_received_total", "Number of envelopes received.", registry=registry
        )
        self.validated = Counter(
            "waku_envelopes_validated_total",
            "Number of envelopes processed by validation.",
            registry=registry,
        )
        self.rejected = Counter(
            "waku_envelopes_rejected_total",
            "Number of envelopes refused by ingest, by reason.",
            ["reason"],
            registry=registry,
        )
        self.cache_failures = Counter(
            "waku_envelopes_cache_failures_total",
            "Number of envelopes which failed to be cached.",
            ["type"],
            registry=registry,
        )
        self.cached = Counter(
            "waku_envelopes_cached_total", "Number of envelopes cached.", ["cache"], registry=registry
        )
        self.size = Histogram(
            "waku_envelopes_size_bytes",
            "Size of processed Waku envelopes in bytes.",
            buckets=_SIZE_BUCKETS,
            registry=registry,
        )
        self.archived = Counter(
            "mailserver_envelopes_total", "Number of envelopes newly archived.", registry=registry
        )
        self.write_size = Histogram(
            "ingest_archive_write_envelopes",
            "Envelopes per archive write.",
            buckets=_WRITE_SIZE_BUCKETS,
            registry=registry,
        )
        self.write_seconds = Histogram(
            "ingest_archive_write_seconds",
            "Duration of one archive write (PutEnvelopes, retries included).",
            buckets=_SECONDS_BUCKETS,
            registry=registry,
        )
        self.write_failures = Counter(
            "ingest_archive_write_failures_total",
            "Archive writes that failed (nothing of them was acknowledged).",
            registry=registry,
        )
        self.ack_seconds = Histogram(
            "ingest_batch_ack_seconds",
            "Time from receiving a batch to acknowledging it.",
            buckets=_SECONDS_BUCKETS,
            registry=registry,
        )
        self.pending = Gauge(
            "ingest_pending_envelopes", "Envelopes queued or being written to the archive.", registry=registry
        )
        self.pending_bytes = Gauge(
            "ingest_pending_bytes", "Bytes of envelopes queued or being written.", registry=registry
        )
        # Children created up front so every series exists (at 0) before the first event.
        self._rejected = {fault: self.rejected.labels(fault.value) for fault in Fault}
        self._cache_failures = {fault: self.cache_failures.labels(fault.value) for fault in STATUS_GO_FAULTS}
        self.cache_hit = self.cached.labels("hit")
        self.cache_miss = self.cached.labels("miss")

    def reject(self, fault: Fault, count: int = 1) -> None:
        """Count refused envelopes under ``fault`` (and status-go's cache failure type if it has one)."""
        self._rejected[fault].inc(count)
        failure = self._cache_failures.get(fault)
        if failure is not None:
            failure.inc(count)

    # BatcherObserver -------------------------------------------------------------------------------

    def write_done(self, items: int, seconds: float, failed: bool) -> None:
        """Record one archive write."""
        self.write_size.observe(items)
        self.write_seconds.observe(seconds)
        if failed:
            self.write_failures.inc()

    def pending_changed(self, items: int, size: int) -> None:
        """Record what the batcher holds."""
        self.pending.set(items)
        self.pending_bytes.set(size)
