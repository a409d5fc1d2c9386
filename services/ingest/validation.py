"""Envelope validation as a status-go mailserver node applies it before archiving, with ingest's own words.

The checks themselves are :func:`wakucodec.validation.check_envelope` — the same function the edge peer's
relay runs, so the two cannot drift (status-go ``waku/waku.go`` ``add``: future, expired / very old,
oversized, PoW, interest; status-go ``mailserver`` archives only what ``add`` accepted). This module adds
what is ingest's own:

- :class:`Rules`, the service's settings, become the codec's :class:`~wakucodec.validation.AcceptancePolicy`
  of a full node whose topic interest is the optional archiving allow-list (empty = every topic; the
  mailserver analogue of step 5). ``MinPowTolerance`` equals ``MinPow``: ingest never changes its minimum
  at run time, so there is no previous value to tolerate.
- The verdict becomes ingest's :class:`~services.ingest.model.Fault` (the same labels, except that a topic
  outside the allow-list is ``topic_not_allowed``) and a human-readable detail with the numbers.
- A recently expired envelope, which status-go drops silently, is reported (``expired``): the caller asked
  ingest to archive it and deserves an answer.
- A decoding error (a non-canonical envelope) is ``malformed``; status-go would refuse the whole packet,
  ingest refuses only that envelope.

Ingest's ``now`` is the instant the edge peer received the envelope (``IngestBatch.received_at``), so a
backlog in the mesh does not turn valid envelopes into expired ones. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.ingest.model import Fault, clip
from wakucodec.constants import DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_SYNC_ALLOWANCE, STATUS_MIN_POW, UINT32_MAX
from wakucodec.envelope import Envelope, decode_envelope
from wakucodec.errors import CodecError
from wakucodec.keccak import keccak256
from wakucodec.pow import calculate_pow
from wakucodec.validation import AcceptancePolicy, EnvelopeFault, check_envelope

__all__ = ["Invalid", "Rules", "Valid", "check", "validate"]


@dataclass(frozen=True, slots=True)
class Rules:
    """The node settings validation depends on (status-go ``WakuConfig`` names in the field docs)."""

    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    """``MaxMessageSize``: the bound on ``20 + len(Data)``."""
    min_pow: float = STATUS_MIN_POW
    """``MinimumPoW``."""
    sync_allowance_s: int = DEFAULT_SYNC_ALLOWANCE
    """``DefaultSyncAllowance``: future tolerance; twice it is the very-old tolerance."""
    topic_allowlist: frozenset[bytes] = frozenset()
    """Topics to archive; empty = all."""
    policy: AcceptancePolicy = field(init=False, repr=False, compare=False)
    """The codec policy these rules amount to (derived once)."""

    def __post_init__(self) -> None:
        policy = AcceptancePolicy(
            max_message_size=self.max_message_size,
            min_pow=self.min_pow,
            min_pow_tolerance=self.min_pow,
            topic_interest=self.topic_allowlist or None,
            sync_allowance=self.sync_allowance_s,
        )
        object.__setattr__(self, "policy", policy)


@dataclass(frozen=True, slots=True)
class Valid:
    """The envelope passes every check."""

    envelope: Envelope
    """The decoded envelope."""
    pow: float
    """PoW with diff = 0 (the value stored in the archive)."""


@dataclass(frozen=True, slots=True)
class Invalid:
    """The envelope breaks a rule."""

    hash: bytes
    """keccak256 of the raw bytes."""
    fault: Fault
    """Which rule."""
    detail: str
    """Why, for humans (at most 256 bytes)."""


def validate(raw: bytes, now: int, rules: Rules) -> Valid | Invalid:
    """Decode ``raw`` strictly and :func:`check` it at UNIX time ``now``.

    The raw length is not bounded here: the gRPC message limit bounds it, and the size rule is applied in
    status-go's order (after the time checks) by :func:`check`.
    """
    try:
        env = decode_envelope(raw, max_size=len(raw))
    except CodecError as err:
        return Invalid(keccak256(raw), Fault.MALFORMED, clip(f"not a valid envelope: {err}"))
    return check(env, now, rules)


def check(env: Envelope, now: int, rules: Rules) -> Valid | Invalid:
    """Apply status-go's checks to a decoded envelope at UNIX time ``now`` (see the module docstring)."""
    verdict = check_envelope(env, now, rules.policy)
    fault = verdict.fault
    if fault is None:
        # The check used the time-adjusted PoW for an envelope from the near future; the archive stores the
        # envelope's own (diff = 0), computed again only in that rare case.
        now32 = now & UINT32_MAX
        return Valid(env, verdict.pow if env.sent <= now32 else calculate_pow(env))
    return Invalid(env.hash, _FAULTS[fault], _detail(fault, env, now & UINT32_MAX, rules, verdict.pow))


_FAULTS = {
    EnvelopeFault.IN_FUTURE: Fault.IN_FUTURE,
    EnvelopeFault.VERY_OLD: Fault.VERY_OLD,
    EnvelopeFault.EXPIRED: Fault.EXPIRED,
    EnvelopeFault.OVERSIZED: Fault.OVERSIZED,
    EnvelopeFault.LOW_POW: Fault.LOW_POW,
    # Ingest's policy is a full node (no bloom), so NO_BLOOM_MATCH cannot occur; mapped for completeness.
    EnvelopeFault.NO_BLOOM_MATCH: Fault.TOPIC_NOT_ALLOWED,
    EnvelopeFault.NO_TOPIC_INTEREST_MATCH: Fault.TOPIC_NOT_ALLOWED,
}


def _detail(fault: EnvelopeFault, env: Envelope, now32: int, rules: Rules, pow_value: float) -> str:
    """Ingest's explanation of ``fault`` (Rejection.detail), with the numbers that decided it."""
    allowance = rules.sync_allowance_s
    if fault is EnvelopeFault.IN_FUTURE:
        return f"sent {env.sent} is {env.sent - now32} s ahead of {now32} (allowance {allowance} s)"
    if fault is EnvelopeFault.VERY_OLD:
        ago = now32 - env.expiry
        return f"expired at {env.expiry}, {ago} s before {now32} (allows {2 * allowance} s)"
    if fault is EnvelopeFault.EXPIRED:
        return f"expired at {env.expiry}, {now32 - env.expiry} s before {now32}"
    if fault is EnvelopeFault.OVERSIZED:
        return f"size 20 + {len(env.data)} exceeds the maximum of {rules.max_message_size}"
    if fault is EnvelopeFault.LOW_POW:
        return f"PoW {pow_value:.9g} is below the minimum {rules.min_pow:.9g}"
    return f"topic 0x{env.topic.hex()} is not archived here"
