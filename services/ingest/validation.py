"""Envelope validation exactly as a status-go mailserver node applies it before archiving (wire §1.5, §4.8).

status-go ``waku/waku.go`` ``addAndBridge`` checks, in this order, with ``now`` = local UNIX seconds
(``uint32``) and ``sent = Expiry - TTL`` (``uint32``, wraps):

1. ``sent > now``: if ``sent - DefaultSyncAllowance > now`` → "envelope from future" (``in_future``);
   otherwise the PoW is recomputed with ``diff = sent - now + 1``.
2. ``Expiry < now``: if ``Expiry + 2 * DefaultSyncAllowance < now`` → "very old envelope" (``very_old``);
   otherwise the envelope is dropped silently (``expired``; ingest reports it as a rejection).
3. ``size() = 20 + len(Data) > MaxMessageSize`` → ``oversized``.
4. ``PoW < MinPow`` (and ``< MinPowTolerance``, which equals MinPow here) → ``low_pow``.
5. Topic interest / bloom: a mailserver matches everything; Mailmesh's analogue is the optional topic
   allow-list (``topic_not_allowed``).

Ingest's ``now`` is the instant the edge peer received the envelope (``IngestBatch.received_at``), so a
backlog in the mesh does not turn valid envelopes into expired ones. A decoding error (§1.1) is ``malformed``;
status-go would reject the whole packet, ingest refuses only that envelope. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.ingest.model import Fault, clip
from wakucodec.constants import (
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_SYNC_ALLOWANCE,
    STATUS_MIN_POW,
    UINT32_MAX,
)
from wakucodec.envelope import Envelope, decode_envelope
from wakucodec.errors import CodecError
from wakucodec.keccak import keccak256
from wakucodec.pow import calculate_pow

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


@dataclass(frozen=True, slots=True)
class Valid:
    """The envelope passes every check."""

    envelope: Envelope
    """The decoded envelope."""
    pow: float
    """PoW with diff = 0 (the value stored in the archive, wire §1.3)."""


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
    now32 = now & UINT32_MAX
    sent = env.sent
    allowance = rules.sync_allowance_s
    diff = 0
    if sent > now32:
        if (sent - allowance) & UINT32_MAX > now32:
            return Invalid(
                env.hash,
                Fault.IN_FUTURE,
                f"sent {sent} is {sent - now32} s ahead of {now32} (allowance {allowance} s)",
            )
        diff = (sent - now32 + 1) & UINT32_MAX  # "adjusted for the time difference, plus one second"
    if env.expiry < now32:
        if (env.expiry + 2 * allowance) & UINT32_MAX < now32:
            return Invalid(
                env.hash,
                Fault.VERY_OLD,
                f"expired at {env.expiry}, {now32 - env.expiry} s before {now32} (allows {2 * allowance} s)",
            )
        return Invalid(
            env.hash, Fault.EXPIRED, f"expired at {env.expiry}, {now32 - env.expiry} s before {now32}"
        )
    if env.size > rules.max_message_size:
        return Invalid(
            env.hash,
            Fault.OVERSIZED,
            f"size 20 + {len(env.data)} exceeds the maximum of {rules.max_message_size}",
        )
    pow_now = calculate_pow(env, diff)
    if pow_now < rules.min_pow:
        return Invalid(env.hash, Fault.LOW_POW, f"PoW {pow_now:.9g} is below the minimum {rules.min_pow:.9g}")
    if rules.topic_allowlist and env.topic not in rules.topic_allowlist:
        return Invalid(env.hash, Fault.TOPIC_NOT_ALLOWED, f"topic 0x{env.topic.hex()} is not archived here")
    return Valid(env, pow_now if diff == 0 else calculate_pow(env, 0))
