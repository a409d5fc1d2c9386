"""Envelope validation on receipt, in the order of §1.5 (SG ``waku.go`` ``addAndBridge``; G920 ``add``).

Pure: :func:`check_envelope` takes the envelope, the local UNIX time and our own :class:`AcceptancePolicy`
and returns a :class:`Verdict`. Checks, with ``sent = Expiry - TTL`` in uint32 arithmetic:

1. ``sent > now``: more than ``sync_allowance`` ahead → ``in_future`` (a time-sync error); otherwise the PoW
   is computed with ``diff = sent - now + 1``;
2. ``Expiry < now``: more than ``2 * sync_allowance`` ago → ``very_old`` (time-sync error); otherwise
   ``expired`` — dropped silently (not an error, not stored);
3. ``20 + len(Data) > max_message_size`` → ``oversized``;
4. ``PoW < min_pow`` and ``PoW < min_pow_tolerance`` → ``low_pow``;
5. topic interest (if we have one: topic in it or in the tolerated previous set), else bloom (subset of ours
   or of the tolerated previous bloom); a full node matches everything → ``no_topic_interest_match`` /
   ``no_bloom_match``.

The fault names are status-go's ``waku_envelopes_cache_failures_total{type}`` labels.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from wakucodec.bloom import bloom_match, is_full_bloom
from wakucodec.constants import UINT32_MAX
from wakucodec.envelope import Envelope
from wakucodec.pow import validation_pow

__all__ = ["AcceptancePolicy", "Fault", "Verdict", "check_envelope"]


class Fault(enum.Enum):
    """Why an envelope was not accepted (status-go cache-failure types, §4.9)."""

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
        return self in (Fault.IN_FUTURE, Fault.VERY_OLD)

    @property
    def silent(self) -> bool:
        """Dropped without an error (recently expired, §1.5 step 2)."""
        return self is Fault.EXPIRED


@dataclass(frozen=True, slots=True)
class AcceptancePolicy:
    """Our own settings that incoming envelopes are checked against."""

    max_message_size: int
    """Largest ``20 + len(Data)``."""
    min_pow: float
    """Current PoW requirement."""
    min_pow_tolerance: float
    """Previous requirement, still tolerated shortly after a change (equal to ``min_pow`` otherwise)."""
    bloom: bytes | None = None
    """Our bloom; None or all-ones = full node."""
    bloom_tolerance: bytes | None = None
    """Previous bloom, tolerated shortly after a change; None = no tolerance."""
    topic_interest: frozenset[bytes] | None = None
    """Our topic interest (takes precedence over the bloom); None = bloom mode."""
    topic_interest_tolerance: frozenset[bytes] | None = None
    """Previous topic interest, tolerated shortly after a change."""
    sync_allowance: int = 10
    """Seconds of clock skew tolerated."""

    @property
    def full_node(self) -> bool:
        """True when every topic matches."""
        return self.topic_interest is None and is_full_bloom(self.bloom)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of :func:`check_envelope`."""

    fault: Fault | None
    """None when the envelope is acceptable."""
    pow: float
    """The PoW the decision used (time-adjusted for an envelope from the near future); 0 if not reached."""
    message: str = ""
    """status-go's error text (for logs and Message Responses); empty when accepted or silently dropped."""

    @property
    def ok(self) -> bool:
        """Accepted."""
        return self.fault is None


def _topic_matches(env: Envelope, policy: AcceptancePolicy) -> Fault | None:
    if policy.topic_interest is not None:
        if env.topic in policy.topic_interest:
            return None
        tolerated = policy.topic_interest_tolerance
        return None if tolerated is not None and env.topic in tolerated else Fault.NO_TOPIC_INTEREST_MATCH
    if is_full_bloom(policy.bloom):
        return None
    sample = env.bloom
    if bloom_match(policy.bloom, sample):
        return None
    tolerated_bloom = policy.bloom_tolerance
    if tolerated_bloom is not None and bloom_match(tolerated_bloom, sample):
        return None
    return Fault.NO_BLOOM_MATCH


def check_envelope(env: Envelope, now: float, policy: AcceptancePolicy) -> Verdict:
    """Validate ``env`` received at UNIX time ``now`` against our ``policy`` (order: module docstring)."""
    now32 = int(now) & UINT32_MAX
    sent = env.sent
    name = env.hash.hex()
    if sent > now32 and sent - policy.sync_allowance > now32:
        return Verdict(Fault.IN_FUTURE, 0.0, "envelope from future")
    if env.expiry < now32:
        if env.expiry + 2 * policy.sync_allowance < now32:
            return Verdict(Fault.VERY_OLD, 0.0, "very old envelope")
        return Verdict(Fault.EXPIRED, 0.0)
    if env.size > policy.max_message_size:
        return Verdict(Fault.OVERSIZED, 0.0, f"huge messages are not allowed [{name}]")
    pow_value = validation_pow(env, now32)
    if pow_value < policy.min_pow and pow_value < policy.min_pow_tolerance:
        return Verdict(
            Fault.LOW_POW, pow_value, f"envelope with low PoW received: PoW={pow_value:f}, hash=[{name}]"
        )
    fault = _topic_matches(env, policy)
    if fault is Fault.NO_TOPIC_INTEREST_MATCH:
        return Verdict(fault, pow_value, f"envelope does not match topic interest, hash=[{name}]")
    if fault is Fault.NO_BLOOM_MATCH:
        return Verdict(fault, pow_value, f"envelope does not match bloom filter, hash=[{name}]")
    return Verdict(None, pow_value)
