"""The edge peer's domain metrics, read at scrape time from the libraries' plain counters.

wakunode and devp2p keep plain ints and ``Counter``s (no Prometheus dependency); :class:`EdgeCollector` turns
them into metric families when Prometheus scrapes, so the hot paths never touch a Prometheus lock. Names:

- ``waku_*`` and ``mailserver_*``: status-go's names and labels (docs/protocol-notes.md §4.9), e.g.
  ``waku_envelopes_received_total``, ``waku_envelopes_cache_failures_total{type}``,
  ``waku_rate_limits_exceeded_total{type}``, ``mailserver_delivery_attempts_total`` (0x7e requests),
  ``mailserver_envelopes_total`` (envelopes sent in 0x7f), ``mailserver_delivery_failures_total{type}``;
  Mailmesh extras of the node as ``waku_*`` too (``waku_envelopes_sent_total``, ``waku_sink_failures_total``,
  ``waku_peer_disconnects_total{cause}``, ``waku_ignored_packets_total{reason}``);
- ``devp2p_*``: the RLPx server (accepts, dials, sessions, rejections, disconnects, errors);
- ``p2p_peers`` (geth's gauge) and ``edge_peers{capability,direction}``;
- ``edge_ingest_*``: the ingest forwarder (buffer levels, acks, reconnects, and
  ``edge_ingest_dropped_envelopes_total{reason}`` — envelopes that could not be buffered);
- ``edge_stream_*``: the live feed; ``edge_history_requests_total{outcome}``; ``edge_relay_cache_*``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from services.edge_peer.logic import EdgePeer
from wakunode.metrics import Histogram

__all__ = ["SCRAPE_WAIT_S", "EdgeCollector", "register"]

#: Longest a scrape waits for the event loop to build the families: a busy loop makes a scrape slow, and
#: one blocked this long makes it fail rather than hang the metrics server.
SCRAPE_WAIT_S = 10.0


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _labelled(name: str, doc: str, label: str, values: Mapping[str, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _histogram(name: str, doc: str, hist: Histogram) -> HistogramMetricFamily:
    buckets: list[tuple[str, float]] = []
    total = 0
    for bound, count in zip(hist.buckets, hist.counts, strict=True):
        total += count
        buckets.append((repr(float(bound)), total))
    buckets.append(("+Inf", hist.count))
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=hist.sum)


class EdgeCollector(Collector):
    """Exports one :class:`EdgePeer`'s counters (see the module docstring).

    Prometheus scrapes from its HTTP server's thread (meshcore.metrics), but the node's peer tables and
    counters belong to the event loop, which changes them as peers come and go. Iterating them from the
    scrape thread failed with "dictionary changed size during iteration" whenever a session started or
    ended mid-scrape — the soak's hostile peers made that a scrape in ten (docs/soak.md). So when ``loop``
    runs in another thread, the families are built by a callback on it and the scrape thread waits for them.
    """

    def __init__(self, edge: EdgePeer, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._edge = edge
        self._loop = loop

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: families are built at scrape time (keeps registration cheap)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Every family from the current counters, read on the loop that owns them (see the class)."""
        loop = self._loop
        if loop is None or not loop.is_running() or _running_loop() is loop:
            return iter(list(self._families()))
        built: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

        def build() -> None:
            if not built.set_running_or_notify_cancel():
                return  # the scrape gave up waiting
            try:
                built.set_result(list(self._families()))
            except BaseException as err:
                built.set_exception(err)

        loop.call_soon_threadsafe(build)
        try:
            return iter(built.result(SCRAPE_WAIT_S))
        finally:
            built.cancel()  # no-op once done

    def _families(self) -> Iterator[Metric]:
        yield from self._waku()
        yield from self._mailserver()
        yield from self._devp2p()
        yield from self._peers()
        yield from self._ingest()
        yield from self._stream()

    def _waku(self) -> Iterator[Metric]:
        m = self._edge.node.metrics
        yield _counter(
            "waku_envelopes_received_total", "Number of envelopes received.", m.envelopes_received_total
        )
        yield _counter(
            "waku_envelopes_validated_total",
            "Number of envelopes processed successfully.",
            m.envelopes_validated_total,
        )
        yield _labelled(
            "waku_envelopes_rejected_total",
            "Number of envelopes rejected.",
            "reason",
            m.envelopes_rejected_total,
        )
        yield _labelled(
            "waku_envelopes_cache_failures_total",
            "Number of envelopes which failed to be cached.",
            "type",
            m.envelopes_cache_failures_total,
        )
        yield _labelled(
            "waku_envelopes_cached_total", "Number of envelopes cached.", "cache", m.envelopes_cached_total
        )
        yield _histogram(
            "waku_envelopes_size_bytes", "Size of processed Waku envelopes in bytes.", m.envelopes_size_bytes
        )
        yield _counter(
            "waku_rate_limits_processed_total",
            "Number of packets Waku rate limiter processed.",
            m.rate_limits_processed_total,
        )
        yield _labelled(
            "waku_rate_limits_exceeded_total",
            "Number of times the Waku rate limits were exceeded.",
            "type",
            m.rate_limits_exceeded_total,
        )
        yield _counter(
            "waku_envelopes_sent_total", "Envelopes written to peers by the relay.", m.envelopes_sent_total
        )
        yield _counter(
            "waku_messages_packets_sent_total",
            "Messages packets written by the relay.",
            m.messages_packets_sent_total,
        )
        yield _counter(
            "waku_cache_evictions_total",
            "Envelopes evicted because the cache was full.",
            m.cache_evictions_total,
        )
        yield _labelled(
            "waku_sink_failures_total", "Envelope sink calls that failed.", "type", m.sink_failures
        )
        yield _labelled(
            "waku_peer_disconnects_total", "Peers dropped by the node, by cause.", "cause", m.peer_disconnects
        )
        yield _labelled(
            "waku_ignored_packets_total", "Packets ignored, by reason.", "reason", m.ignored_packets
        )
        yield _counter(
            "waku_confirmations_sent_total",
            "Message Response + Batch Ack pairs sent.",
            m.confirmations_sent_total,
        )
        cache = self._edge.node.relay.cache
        yield _gauge("edge_relay_cache_envelopes", "Envelopes in the relay cache.", len(cache))
        yield _gauge("edge_relay_cache_bytes", "Sum of envelope sizes in the relay cache.", cache.bytes)

    def _mailserver(self) -> Iterator[Metric]:
        m = self._edge.node.mailserver_metrics
        yield _counter("mailserver_envelopes_total", "Number of envelopes processed.", m.envelopes_total)
        yield _counter(
            "mailserver_delivery_attempts_total",
            "Number of Whisper envelopes processed.",
            m.delivery_attempts_total,
        )
        yield _labelled(
            "mailserver_delivery_failures_total",
            "Number of requests that failed processing.",
            "type",
            m.delivery_failures_total,
        )
        yield _counter(
            "mailserver_requests_batched_total",
            "Number of processed batched requests.",
            m.requests_batched_total,
        )
        yield _histogram(
            "mailserver_requests_bundle_process_duration_seconds",
            "The time it took to process message bundles.",
            m.requests_bundle_process_duration_seconds,
        )
        yield _histogram(
            "mailserver_send_raw_envelope_duration_seconds",
            "The time it took to send a Whisper raw envelope.",
            m.send_raw_envelope_duration_seconds,
        )
        yield _histogram(
            "mailserver_sent_envelope_batch_size_bytes",
            "Size of processed Whisper envelopes in bytes.",
            m.sent_envelope_batch_size_bytes,
        )
        yield _histogram(
            "mailserver_delivery_duration_seconds",
            "Time it takes to deliver messages.",
            m.delivery_duration_seconds,
        )
        history = self._edge.history
        if history is not None:
            yield _labelled(
                "edge_history_requests_total", "history-query calls by outcome.", "outcome", history.outcomes
            )

    def _devp2p(self) -> Iterator[Metric]:
        s = self._edge.server.stats
        yield _counter("devp2p_inbound_accepted_total", "TCP connections accepted.", s.inbound_accepted)
        yield _counter("devp2p_dials_total", "Outbound dial attempts.", s.dials)
        yield _counter("devp2p_sessions_total", "Sessions established.", s.sessions)
        yield _labelled(
            "devp2p_rejected_connections_total",
            "Connections that did not become a session.",
            "reason",
            s.rejected,
        )
        yield _labelled(
            "devp2p_disconnects_sent_total", "Disconnects sent, by reason.", "reason", s.disconnects_sent
        )
        yield _labelled(
            "devp2p_disconnects_received_total",
            "Disconnects received, by reason.",
            "reason",
            s.disconnects_received,
        )
        yield _labelled("devp2p_errors_total", "Errors that ended a connection, by class.", "class", s.errors)

    def _peers(self) -> Iterator[Metric]:
        views = self._edge.peers()
        yield _gauge("p2p_peers", "Connected waku/shh peers.", len(views))
        family = GaugeMetricFamily(
            "edge_peers",
            "Connected peers by negotiated capability and direction.",
            labels=["capability", "direction"],
        )
        counts: dict[tuple[str, str], int] = {}
        for view in views:
            key = (view.info.capability, "inbound" if view.info.inbound else "outbound")
            counts[key] = counts.get(key, 0) + 1
        for cap in self._edge.node.config.capabilities:
            for direction in ("inbound", "outbound"):
                family.add_metric([cap, direction], counts.get((cap, direction), 0))
        yield family
        yield _gauge(
            "edge_peers_max", "Configured maximum number of peers.", self._edge.server.config.max_peers
        )
        yield _gauge(
            "devp2p_connections",
            "devp2p sessions (before waku/shh handshake too).",
            len(self._edge.server.peers),
        )

    def _ingest(self) -> Iterator[Metric]:
        fwd = self._edge.forwarder
        s = fwd.stats
        yield _gauge(
            "edge_ingest_buffered_envelopes",
            "Envelopes queued or unacknowledged for ingest.",
            fwd.buffered_envelopes,
        )
        yield _gauge(
            "edge_ingest_buffered_bytes",
            "Envelope bytes queued or unacknowledged for ingest.",
            fwd.buffered_bytes,
        )
        yield _gauge(
            "edge_ingest_buffer_max_envelopes", "Ingest buffer bound (envelopes).", fwd.max_envelopes
        )
        yield _gauge(
            "edge_ingest_connected", "1 while the Ingest stream delivers acks.", 1 if s.connected else 0
        )
        yield _counter(
            "edge_ingest_envelopes_submitted_total",
            "Envelopes handed to the forwarder.",
            s.envelopes_submitted,
        )
        yield _counter("edge_ingest_batches_sent_total", "Batches written to Ingest streams.", s.batches_sent)
        yield _counter(
            "edge_ingest_batches_resent_total", "Batches re-sent after a stream failure.", s.batches_resent
        )
        yield _counter("edge_ingest_batches_acked_total", "Batches acknowledged by ingest.", s.batches_acked)
        family = CounterMetricFamily(
            "edge_ingest_envelopes_acked_total",
            "Envelopes acknowledged by ingest, by outcome.",
            labels=["outcome"],
        )
        family.add_metric(["accepted"], s.envelopes_accepted)
        family.add_metric(["duplicate"], s.envelopes_duplicate)
        family.add_metric(["rejected"], s.envelopes_rejected)
        yield family
        dropped = CounterMetricFamily(
            "edge_ingest_dropped_envelopes_total",
            "Envelopes that could not be buffered for ingest (never silently dropped: also logged).",
            labels=["reason"],
        )
        for reason in ("buffer_full", "shutdown"):
            dropped.add_metric([reason], s.dropped.get(reason, 0))
        yield dropped
        yield _counter(
            "edge_ingest_backpressure_waits_total",
            "Batches that waited for buffer room.",
            s.backpressure_waits,
        )
        yield _counter("edge_ingest_streams_opened_total", "Ingest streams opened.", s.streams_opened)
        yield _labelled(
            "edge_ingest_stream_failures_total",
            "Ingest streams that ended, by error.",
            "error",
            s.stream_failures,
        )

    def _stream(self) -> Iterator[Metric]:
        feed = self._edge.feed
        s = feed.stats
        yield _gauge("edge_stream_subscribers", "Open StreamEnvelopes subscriptions.", feed.subscribers)
        yield _counter(
            "edge_stream_envelopes_published_total", "Envelopes sequenced into the live feed.", s.published
        )
        yield _counter("edge_stream_envelopes_queued_total", "Envelopes queued to subscribers.", s.delivered)
        yield _counter(
            "edge_stream_slow_consumers_total", "Subscriptions ended as slow consumers.", s.slow_consumers
        )
        yield _counter("edge_stream_resumed_total", "Subscriptions resumed exactly.", s.resumed)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def register(edge: EdgePeer, registry: CollectorRegistry) -> EdgeCollector:
    """Register the collector for ``edge`` in ``registry``; called on the event loop that runs ``edge``."""
    collector = EdgeCollector(edge, _running_loop())
    registry.register(collector)
    return collector
