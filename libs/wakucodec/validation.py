"""Envelope validation on receipt: the one implementation of status-go's rules, for the relay and for ingest.

Pure: :func:`check_envelope` takes a decoded envelope, the local UNIX time and an :class:`AcceptancePolicy`
and returns a :class:`Verdict`. The checks and their order are status-go's (``waku/waku.go`` ``add`` /
``addAndBridge``, same logic in go-ethereum v1.9 ``whisper/whisperv6/whisper.go`` ``add``), with
``now = uint32(time.Unix())`` and ``sent = Expiry - TTL``:

1. ``sent > now``: if ``sent - SyncAllowance > now`` → ``in_future`` (a ``TimeSyncError``); otherwise the PoW
   is recomputed with ``diff = sent - now + 1`` ("adjusted for the time difference, plus one second");
2. ``Expiry < now``: if ``Expiry + 2 * SyncAllowance < now`` → ``very_old`` (``TimeSyncError``); otherwise
   ``expired`` — status-go drops it without an error;
3. ``20 + len(Data) > MaxMessageSize`` → ``oversized``;
4. ``PoW < MinPow`` and ``PoW < MinPowTolerance`` → ``low_pow``;
5. our interest: in topic-interest mode a topic in neither the interest nor the tolerated previous set →
   ``no_topic_interest_match``; otherwise (bloom mode) a bloom that matches neither our bloom nor the
   tolerated previous one → ``no_bloom_match``. A full node matches everything.

The fault names are status-go's ``waku_envelopes_cache_failures_total{type}`` labels.

**Go arithmetic.** ``Expiry``, ``TTL``, ``now`` and the sync allowance are ``uint32`` in Go, so
``sent - SyncAllowance`` and ``Expiry + 2 * SyncAllowance`` wrap. Both are computed modulo 2**32 here: an
envelope sent at second 5 is "from the future" against ``now = 0`` (5 - 10 wraps high), and one that
expired near the top of the range is "very old" once ``Expiry + 20`` wraps below ``now``. (The relay's former
copy compared without wrapping and disagreed with status-go at those edges; ingest's copy masked.)

**One set of constants.** The allowance defaults to ``DefaultSyncAllowance`` (10 s) from
:mod:`wakucodec.constants`; callers may configure it (status-go uses the constant).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from wakucodec.bloom import bloom_match, is_full_bloom
from wakucodec.constants import DEFAULT_SYNC_ALLOWANCE, UINT32_MAX
from wakucodec.envelope import Envelope
from wakucodec.pow import calculate_pow

__all__ = ["AcceptancePolicy", "EnvelopeFault", "Verdict", "check_envelope"]


class EnvelopeFault(enum.Enum):
    """Why an envelope was not accepted; the value is status-go's cache-failure label."""

    IN_FUTURE = "in_future"
    VERY_OLD = "very_old"
    EXPIRED = "expired"
    OVERSIZED = "oversized"
    LOW_POW = "low_pow"
    NO_BLOOM_MATCH = "no_bloom_match"
    NO_TOPIC_INTEREST_MATCH = "no_topic_interest_match"

    @property
    def time_sync(self) -> bool:
        """status-go ``TimeSyncError``: reported with ``EnvelopeTimeNotSynced`` in Message Responses."""
        return self in (EnvelopeFault.IN_FUTURE, EnvelopeFault.VERY_OLD)

    @property
    def silent(self) -> bool:
        """Dropped by status-go without an error (recently expired, step 2)."""
        return self is EnvelopeFault.EXPIRED


@dataclass(frozen=True, slots=True)
class AcceptancePolicy:
    """The receiving node's own settings that incoming envelopes are checked against."""

    max_message_size: int
    """``MaxMessageSize``: the largest ``20 + len(Data)``."""
    min_pow: float
    """``MinPow``: the current PoW requirement."""
    min_pow_tolerance: float
    """``MinPowTolerance``: the previous requirement, tolerated shortly after a change (else ``min_pow``)."""
    bloom: bytes | None = None
    """Our bloom; None or all-ones = full node."""
    bloom_tolerance: bytes | None = None
    """Previous bloom, tolerated shortly after a change; None = no tolerance."""
    topic_interest: frozenset[bytes] | None = None
    """Our topic interest (takes precedence over the bloom); None = bloom mode."""
    topic_interest_tolerance: frozenset[bytes] | None = None
    """Previous topic interest, tolerated shortly after a change."""
    sync_allowance: int = DEFAULT_SYNC_ALLOWANCE
    """Seconds of clock skew tolerated ahead (twice this behind), ``DefaultSyncAllowance``."""

    @property
    def full_node(self) -> bool:
        """True when every topic matches."""
        return self.topic_interest is None and is_full_bloom(self.bloom)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of :func:`check_envelope`."""

    fault: EnvelopeFault | None
    """None when the envelope is acceptable."""
    pow: float
    """The PoW the decision used (time-adjusted for an envelope from the near future); 0 if not reached."""
    message: str = ""
    """status-go's error text (for logs and Message Responses); empty when accepted or silently dropped."""

    @property
    def ok(self) -> bool:
        """Accepted."""
        return self.fault is None


def _interest_fault(env: Envelope, policy: AcceptancePolicy) -> EnvelopeFault | None:
    if policy.topic_interest is not None:
        if env.topic in policy.topic_interest:
            return None
        tolerated = policy.topic_interest_tolerance
        if tolerated is not None and env.topic in tolerated:
            return None
        return EnvelopeFault.NO_TOPIC_INTEREST_MATCH
    if is_full_bloom(policy.bloom):
        return None
    sample = env.bloom
    if bloom_match(policy.bloom, sample):
        return None
    if policy.bloom_tolerance is not None and bloom_match(policy.bloom_tolerance, sample):
        return None
    return EnvelopeFault.NO_BLOOM_MATCH


def check_envelope(env: Envelope, now: float, policy: AcceptancePolicy) -> Verdict:
    """Validate ``env`` received at UNIX time ``now`` against ``policy`` (order: module docstring)."""
    now32 = int(now) & UINT32_MAX
    sent = env.sent
    allowance = policy.sync_allowance
    diff = 0
    if sent > now32:
        if (sent - allowance) & UINT32_MAX > now32:
            return Verdict(EnvelopeFault.IN_FUTURE, 0.0, "envelope from future")
        diff = (sent - now32 + 1) & UINT32_MAX
    if env.expiry < now32:
        if (env.expiry + 2 * allowance) & UINT32_MAX < now32:
            return Verdict(EnvelopeFault.VERY_OLD, 0.0, "very old envelope")
        return Verdict(EnvelopeFault.EXPIRED, 0.0)
    if env.size > policy.max_message_size:
        return Verdict(EnvelopeFault.OVERSIZED, 0.0, f"huge messages are not allowed [{env.hash.hex()}]")
    pow_value = calculate_pow(env, diff)
    if pow_value < policy.min_pow and pow_value < policy.min_pow_tolerance:
        text = f"envelope with low PoW received: PoW={pow_value:f}, hash=[{env.hash.hex()}]"
        return Verdict(EnvelopeFault.LOW_POW, pow_value, text)
    fault = _interest_fault(env, policy)
    if fault is EnvelopeFault.NO_TOPIC_INTEREST_MATCH:
        text = f"envelope does not match topic interest, hash=[{env.hash.hex()}]"
        return Verdict(fault, pow_value, text)
    if fault is EnvelopeFault.NO_BLOOM_MATCH:
        return Verdict(fault, pow_value, f"envelope does not match bloom filter, hash=[{env.hash.hex()}]")
    return Verdict(None, pow_value)
