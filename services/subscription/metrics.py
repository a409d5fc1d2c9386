"""The subscription service's domain metrics, declared in one place (``mailmesh_subscription_*``).

Gauges that describe in-memory state (subscriptions, consumers, lag, writer role) are read at scrape time;
counters follow the commits (records written by origin, events emitted by type, by their MESSAGING-API
name).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from meshcore.metrics import PerRegistry
from msgstore.types import Event, EventType, MessageOrigin, Record
from services.subscription.hub import EventHub
from services.subscription.inputs import RecordInputs
from services.subscription.recorder import Recorder
from services.subscription.rules import Change

__all__ = ["SubscriptionMetrics"]

_ORIGINS = {MessageOrigin.SEND: "send", MessageOrigin.SUBSCRIPTION: "subscription"}


class SubscriptionMetrics(PerRegistry):
    """The metric set in one registry."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.subscriptions = Gauge(
            "mailmesh_subscription_subscriptions",
            "Active subscriptions known to the writer (the reserved background one included).",
            registry=registry,
        )
        self.writer = Gauge(
            "mailmesh_subscription_writer",
            "1 while this replica holds the records/writer lease.",
            registry=registry,
        )
        self.records = Counter(
            "mailmesh_subscription_records_written_total",
            "Record changes committed, by the record's origin (send, subscription).",
            ("origin",),
            registry=registry,
        )
        self.events = Counter(
            "mailmesh_subscription_events_emitted_total",
            "Events committed by this replica, by MESSAGING-API name.",
            ("event",),
            registry=registry,
        )
        self.consumers = Gauge(
            "mailmesh_subscription_event_consumers",
            "Open StreamEvents and PollEvents consumers.",
            registry=registry,
        )
        self.slowest_lag = Gauge(
            "mailmesh_subscription_slowest_consumer_lag_events",
            "Events buffered and unread by the slowest live consumer.",
            registry=registry,
        )
        self.resume_misses = Counter(
            "mailmesh_subscription_feed_resume_misses_total",
            "Streams that could not continue after the committed position (the edge peer or history-query "
            "instance restarted, or no longer holds the items after it): what it dropped meanwhile is not "
            "applied. By feed (edge, history).",
            ("feed",),
            registry=registry,
        )
        self.unstored = Gauge(
            "mailmesh_subscription_unstored_records",
            "Records the recurring stored check still asks about.",
            registry=registry,
        )

    def follow(
        self,
        recorder: Recorder,
        hub: EventHub,
        inputs: RecordInputs,
        on_resume_miss: list[Callable[[str, str], None]] | None = None,
    ) -> None:
        """Read the gauges from the live objects at scrape time; count every commit and missed resume."""
        if on_resume_miss is not None:
            on_resume_miss.append(self.missed)
        self.subscriptions.set_function(
            lambda: len(recorder.index.subscriptions) if recorder.is_writer else 0
        )
        self.writer.set_function(lambda: 1 if recorder.is_writer else 0)
        self.consumers.set_function(lambda: hub.consumers)
        self.slowest_lag.set_function(lambda: hub.slowest_lag)
        self.unstored.set_function(lambda: inputs.unstored)
        recorder.on_commit.append(self._committed)
        recorder.on_events.append(self._emitted)

    def _committed(self, change: Change, record: Record) -> None:
        self.records.labels(_ORIGINS.get(record.origin, "unspecified")).inc()

    def _emitted(self, events: Sequence[Event]) -> None:
        for event in events:
            if event.type is not EventType.UNSPECIFIED:  # a revision entry is no Messaging API event
                self.events.labels(event.type.spec_name).inc()

    def missed(self, kind: str, target: str) -> None:
        """A feed could not resume after the committed position (the follower logged a WARNING)."""
        self.resume_misses.labels(kind).inc()
