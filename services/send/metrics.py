"""The send service's domain metrics, declared in one place (``waku_send_*``, after status-go's ``waku_*``).

Counted from the saved changes (:meth:`SendMetrics.changed`), so every number is about what is durable:
a request counts as accepted when its first change is saved by its shard's owner, an attempt when its
SENDING change is, an outcome when its final change is.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from meshcore.metrics import PerRegistry
from msgstore.types import OutboxEntry, SendState

__all__ = ["SendMetrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class SendMetrics(PerRegistry):
    """The metric set in one registry; implements ``ports.EngineObserver``."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.requests = Counter(
            "waku_send_requests_total",
            "Send requests by outcome: accepted, succeeded, failed, canceled.",
            ("outcome",),
            registry=registry,
        )
        self.attempts = Counter(
            "waku_send_attempts_total",
            "Attempts by result: sent, no_peers, rejected, not_stored, interrupted.",
            ("result",),
            registry=registry,
        )
        self.retries = Counter(
            "waku_send_retries_total", "Attempts after the first of a request.", registry=registry
        )
        self.pending = Gauge(
            "waku_send_pending", "Unfinished requests of the shards owned.", registry=registry
        )
        self.paused = Gauge(
            "waku_send_paused",
            "1 while attempts are halted because the node is Unhealthy.",
            registry=registry,
        )
        self.shards = Gauge("waku_send_shards_owned", "Outbox shards this replica owns.", registry=registry)
        self.subscribed_topics = Gauge(
            "waku_send_subscribed_topics",
            "(pubsub topic, content topic) pairs the active subscriptions cover, as last read; with "
            "MSGAPI_STORE_CONFIRMATION their Sends are store-confirmed.",
            registry=registry,
        )
        self.time_to_sent = Histogram(
            "waku_send_time_to_sent_seconds",
            "From Send accepted to sent (relayed to a Waku peer).",
            registry=registry,
            buckets=_LATENCY_BUCKETS,
        )
        self.time_to_stored = Histogram(
            "waku_send_time_to_stored_seconds",
            "From Send accepted to stored (the archive confirmed it).",
            registry=registry,
            buckets=_LATENCY_BUCKETS,
        )

    def changed(self, before: OutboxEntry | None, after: OutboxEntry) -> None:
        """Count one saved change."""
        if (before is None or before.sequence == 0) and after.state is SendState.QUEUED:
            self.requests.labels("accepted").inc()
        state = after.state
        prev = before.state if before is not None else None
        if state is SendState.SENDING and prev is not SendState.SENDING and after.progress.attempts > 1:
            self.retries.inc()
        if prev is SendState.SENDING and state is not SendState.SENDING:
            self.attempts.labels(_attempt_result(after)).inc()
        if after.sent and (before is None or not before.sent) and after.sent_at is not None:
            self.time_to_sent.observe(max(0.0, after.sent_at - after.progress.scheduled_at))
        if after.stored and (before is None or not before.stored) and after.stored_at is not None:
            self.time_to_stored.observe(max(0.0, after.stored_at - after.progress.scheduled_at))
        if state.is_final:
            self.requests.labels(state.name.lower()).inc()

    def owned(self, shards: int, pending: int, paused: bool) -> None:
        """Gauges after a scheduling pass."""
        self.shards.set(shards)
        self.pending.set(pending)
        self.paused.set(1 if paused else 0)


def _attempt_result(entry: OutboxEntry) -> str:
    if entry.sent and entry.progress.state in (SendState.SUCCEEDED, SendState.AWAITING_STORE):
        return "sent"
    error = entry.error
    if error is None:
        return "sent"
    return error.kind.name.lower()
