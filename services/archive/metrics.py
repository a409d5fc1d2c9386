"""The archive service's domain metrics, declared in one place (house style "Observability").

status-go names where status-go has the metric (docs/protocol-notes.md §4.9, SG
``mailserver/metrics.go``), with the backend in the ``db`` label as status-go puts ``leveldb``/``postgres``
there:

- ``mailserver_archived_envelopes_total{db}``: gauge of envelopes archived; +1 per envelope written and
  recounted from the store every ``ARCHIVE_STATS_INTERVAL_SECONDS`` (status-go: every 60 s);
- ``mailserver_archived_envelope_size_bytes{db}``: histogram, buckets 1024 × 2^k for k < 11, observing
  ``20 + Size()`` per envelope written, where Go's ``Size()`` is already ``20 + len(Data)`` (status-go counts
  the header twice; kept so dashboards compare);
- ``mailserver_archived_envelopes_failures_total{db}``: envelopes whose write failed in the store.

Mailmesh's own, prefixed ``mailmesh_archive_``: put batch latency and size, per-item outcomes, query latency
and page sizes, store errors by operation, the SQLite cleaner, and store reachability.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.utils import INF

__all__ = ["SIZE_BUCKETS", "ArchiveMetrics"]

#: status-go ``prom.ExponentialBuckets(1024, 2, 11)``.
SIZE_BUCKETS = tuple(1024.0 * 2**k for k in range(11))
_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, INF)
_COUNTS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, INF)


class ArchiveMetrics:
    """Every domain metric of one archive service, in ``registry``, labelled with backend ``db``."""

    def __init__(self, db: str, registry: CollectorRegistry = REGISTRY) -> None:
        self.db = db
        r = registry
        self._archived = Gauge(
            "mailserver_archived_envelopes_total",
            "Number of envelopes currently archived in database.",
            ["db"],
            registry=r,
        )
        self._size = Histogram(
            "mailserver_archived_envelope_size_bytes",
            "Size of envelopes saved.",
            ["db"],
            buckets=SIZE_BUCKETS,
            registry=r,
        )
        self._failures = Counter(
            "mailserver_archived_envelopes_failures_total",
            "Number of failures storing a envelope.",
            ["db"],
            registry=r,
        )
        self._put_seconds = Histogram(
            "mailmesh_archive_put_batch_seconds",
            "Time to store one PutEnvelopes batch durably.",
            ["db"],
            buckets=_LATENCY,
            registry=r,
        )
        self._put_items = Histogram(
            "mailmesh_archive_put_batch_items",
            "Items per PutEnvelopes batch.",
            ["db"],
            buckets=_COUNTS,
            registry=r,
        )
        self._outcomes = Counter(
            "mailmesh_archive_put_items_total",
            "PutEnvelopes items by outcome (inserted, duplicate, invalid, expired).",
            ["db", "outcome"],
            registry=r,
        )
        self._query_seconds = Histogram(
            "mailmesh_archive_query_seconds",
            "Time to answer one QueryEnvelopes call, by filter (topics, bloom, all).",
            ["db", "filter"],
            buckets=_LATENCY,
            registry=r,
        )
        self._query_envelopes = Histogram(
            "mailmesh_archive_query_envelopes",
            "Envelopes returned per QueryEnvelopes page.",
            ["db"],
            buckets=(0, *_COUNTS),
            registry=r,
        )
        self._store_errors = Counter(
            "mailmesh_archive_store_errors_total",
            "Store failures by operation and kind (unavailable, corrupt, schema, other).",
            ["db", "operation", "kind"],
            registry=r,
        )
        self._purged = Counter(
            "mailmesh_archive_purged_envelopes_total",
            "Envelopes deleted by the SQLite retention cleaner.",
            ["db"],
            registry=r,
        )
        self._purge_seconds = Histogram(
            "mailmesh_archive_purge_seconds",
            "Duration of one run of the SQLite retention cleaner.",
            ["db"],
            buckets=_LATENCY,
            registry=r,
        )
        self._up = Gauge(
            "mailmesh_archive_store_up",
            "1 while the store is open and answered its last probe, else 0.",
            ["db"],
            registry=r,
        )
        # Export every labelled series from the start, so dashboards see zeros rather than gaps.
        for m in (self._archived, self._size, self._failures, self._put_seconds, self._put_items):
            m.labels(db)
        for m in (self._purged, self._purge_seconds, self._up, self._query_envelopes):
            m.labels(db)

    def archived(self, sizes: list[int]) -> None:
        """Envelopes newly written, by Go ``Size()`` (20 + len(Data)): gauge +n, one observation each."""
        if sizes:
            self._archived.labels(self.db).inc(len(sizes))
        hist = self._size.labels(self.db)
        for size in sizes:
            hist.observe(20 + size)  # status-go: EnvelopeHeaderLength + env.Size()

    def recount(self, envelopes: int) -> None:
        """Set the archived gauge from the store's count."""
        self._archived.labels(self.db).set(envelopes)

    def put_failed(self, items: int) -> None:
        """A batch of ``items`` envelopes could not be stored."""
        self._failures.labels(self.db).inc(items)

    def put_batch(self, items: int, seconds: float) -> None:
        """A batch was stored."""
        self._put_items.labels(self.db).observe(items)
        self._put_seconds.labels(self.db).observe(seconds)

    def outcome(self, outcome: str, count: int = 1) -> None:
        """``count`` items ended with ``outcome``."""
        if count:
            self._outcomes.labels(self.db, outcome).inc(count)

    def query(self, filter_kind: str, envelopes: int, seconds: float) -> None:
        """A query page was answered."""
        self._query_seconds.labels(self.db, filter_kind).observe(seconds)
        self._query_envelopes.labels(self.db).observe(envelopes)

    def store_error(self, operation: str, kind: str) -> None:
        """The store failed ``operation`` with an error of ``kind``."""
        self._store_errors.labels(self.db, operation, kind).inc()

    def purged(self, envelopes: int, seconds: float) -> None:
        """The cleaner ran."""
        self._purged.labels(self.db).inc(envelopes)
        self._purge_seconds.labels(self.db).observe(seconds)

    def store_up(self, up: bool) -> None:
        """Store reachability."""
        self._up.labels(self.db).set(1 if up else 0)
