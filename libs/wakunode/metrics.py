"""Counters and histograms of the node, as plain objects the host exports (protocol-notes §4.9).

Field names are the Prometheus names of status-go (``waku/common/metrics.go``, ``mailserver/metrics.go``)
without their prefix: ``WakuMetrics.envelopes_received_total`` is exported as
``waku_envelopes_received_total``, ``MailserverMetrics.delivery_failures_total["validation"]`` as
``mailserver_delivery_failures_total{type="validation"}``. Labelled counters are ``collections.Counter``
keyed by the label value. Fields marked *Mailmesh* have no status-go equivalent. The library has no
Prometheus dependency: the edge-peer service reads these objects at scrape time.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["DURATION_BUCKETS", "Histogram", "MailserverMetrics", "WakuMetrics", "exponential_buckets"]


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus ``ExponentialBuckets(start, factor, count)``."""
    return tuple(start * factor**i for i in range(count))


#: Prometheus ``DefBuckets`` (seconds), used by status-go's duration histograms.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(slots=True)
class Histogram:
    """A cumulative-bucket histogram like Prometheus': ``counts[i]`` observations ``<= buckets[i]``."""

    buckets: tuple[float, ...]
    """Upper bounds, ascending (``+Inf`` is implicit: it is :attr:`count`)."""
    counts: list[int] = field(default_factory=list)
    """Non-cumulative count per bucket (the exporter accumulates)."""
    sum: float = 0.0
    """Sum of observed values."""
    count: int = 0
    """Number of observations."""

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        """Record one value."""
        index = bisect.bisect_left(self.buckets, value)
        if index < len(self.counts):
            self.counts[index] += 1
        self.sum += value
        self.count += 1


@dataclass(slots=True)
class WakuMetrics:
    """``waku_*`` metrics of the relay (SG ``waku/common/metrics.go``)."""

    envelopes_received_total: int = 0
    """Envelopes received in Messages packets (and published locally), before validation."""
    envelopes_validated_total: int = 0
    """Envelopes that passed validation (§1.5)."""
    envelopes_rejected_total: Counter[str] = field(default_factory=Counter)
    """Packets/options refused, by reason: ``invalid_data`` (undecodable Messages payload),
    ``invalid_envelope`` (an envelope broke a §1.5 rule), ``invalid_settings_changed`` (bad Status Update),
    ``untrusted_p2p`` (0x7f/0x7d from an untrusted peer), ``invalid_p2p`` (undecodable 0x7f/0x7d)."""
    envelopes_cache_failures_total: Counter[str] = field(default_factory=Counter)
    """Validation failures by status-go type: ``in_future``, ``very_old``, ``expired``, ``oversized``,
    ``low_pow``, ``no_bloom_match``, ``no_topic_interest_match``."""
    envelopes_cached_total: Counter[str] = field(default_factory=Counter)
    """Valid envelopes by ``cache`` label: ``miss`` (new) or ``hit`` (already cached)."""
    envelopes_size_bytes: Histogram = field(
        default_factory=lambda: Histogram(exponential_buckets(256, 4, 10))
    )
    """``size()`` of newly cached envelopes."""
    rate_limits_processed_total: int = 0
    """Packets that went through the rate limiter."""
    rate_limits_exceeded_total: Counter[str] = field(default_factory=Counter)
    """Limit violations by ``type``: ``ip`` or ``peer_id``."""
    # --- Mailmesh ---------------------------------------------------------------------------------------
    envelopes_sent_total: int = 0
    """*Mailmesh*: envelopes written to peers by the relay."""
    messages_packets_sent_total: int = 0
    """*Mailmesh*: Messages packets written by the relay."""
    cache_evictions_total: int = 0
    """*Mailmesh*: envelopes evicted early because the cache was full."""
    sink_failures: Counter[str] = field(default_factory=Counter)
    """*Mailmesh*: EnvelopeSink calls that ``timeout``-ed or raised an ``error``."""
    peer_disconnects: Counter[str] = field(default_factory=Counter)
    """*Mailmesh*: peers we dropped, by cause: ``bad_status``, ``status_timeout``, ``oversized``,
    ``rate_limit``, ``protocol`` (shh PoW/bloom packets), ``both_light`` (two light nodes, §3.1)."""
    ignored_packets: Counter[str] = field(default_factory=Counter)
    """*Mailmesh*: packets ignored: ``second_status``, ``unknown_code``, ``p2p_request_no_mailserver``,
    ``unsolicited_p2p``."""
    confirmations_sent_total: int = 0
    """*Mailmesh*: Message Response + Batch Ack pairs sent."""
    p2p_messages_received_total: Counter[str] = field(default_factory=Counter)
    """*Mailmesh*: 0x7f packets accepted from trusted peers, by form: ``list`` or ``single``."""


@dataclass(slots=True)
class MailserverMetrics:
    """``mailserver_*`` metrics of 0x7e handling (SG ``mailserver/metrics.go``)."""

    envelopes_total: int = 0
    """Envelopes delivered to requesters in 0x7f packets."""
    delivery_attempts_total: int = 0
    """0x7e requests taken up by the peer's worker (decodable or not)."""
    delivery_failures_total: Counter[str] = field(default_factory=Counter)
    """Failed requests by ``type``, each request under at most one: ``validation`` (undecodable / refused
    request), ``peer_req_limit`` (rate limited), ``iterator`` (the backend failed), ``process`` (timed out, or
    cut short by a shutdown), ``peer_gone`` (*Mailmesh*: the requester left while its answer was being
    prepared or sent), ``historic_msg_resp`` (all sent but the final 0x7d). The rest ended with a 0x7d
    (see :mod:`wakunode.mailserver`)."""
    requests_batched_total: int = 0
    """Requests answered with batched 0x7f packets (``Batch = true``)."""
    requests_bundle_process_duration_seconds: Histogram = field(
        default_factory=lambda: Histogram(DURATION_BUCKETS)
    )
    """Time from request decode to the last 0x7f written."""
    send_raw_envelope_duration_seconds: Histogram = field(default_factory=lambda: Histogram(DURATION_BUCKETS))
    """Time to write one 0x7f packet."""
    sent_envelope_batch_size_bytes: Histogram = field(
        default_factory=lambda: Histogram(exponential_buckets(1024, 4, 10))
    )
    """Payload size of each 0x7f packet."""
    delivery_duration_seconds: Histogram = field(default_factory=lambda: Histogram(DURATION_BUCKETS))
    """Time from receiving a request to sending its 0x7d."""
