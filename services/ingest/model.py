"""Domain values of the ingest service: why an envelope is refused, what is archived, what a batch got.

Plain data shared by validation, the batcher, the ingest logic, the archive client and the servicer; nothing
here does I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from meshcore.errors import Unavailable
from meshcore.protoconv import clip_utf8
from wakucodec.envelope import Envelope

__all__ = [
    "DETAIL_MAX_BYTES",
    "STATUS_GO_FAULTS",
    "Accepted",
    "ArchiveUnavailable",
    "BatchOutcome",
    "Fault",
    "ItemOutcome",
    "Rejection",
    "ShuttingDown",
    "clip",
]

#: Rejection.detail is at most this many bytes (ingest.proto).
DETAIL_MAX_BYTES = 256


def clip(text: str, limit: int = DETAIL_MAX_BYTES) -> str:
    """Cut ``text`` to at most ``limit`` UTF-8 bytes (marking a cut with "...")."""
    return clip_utf8(text, limit)


class Fault(enum.Enum):
    """Why one envelope is not archived; the value is the metric label.

    The first five are status-go's ``waku_envelopes_cache_failures_total`` types, checked in status-go's
    order (protocol-notes §1.5); the rest are Mailmesh's own.
    """

    IN_FUTURE = "in_future"
    """Sent more than the sync allowance ahead of received_at (§1.5 step 1)."""
    VERY_OLD = "very_old"
    """Expired more than twice the sync allowance before received_at (§1.5 step 2)."""
    EXPIRED = "expired"
    """Expired, but less than twice the allowance ago: status-go drops it silently; ingest reports it."""
    OVERSIZED = "oversized"
    """``20 + len(Data)`` above the max message size (§1.5 step 3)."""
    LOW_POW = "low_pow"
    """Proof of work below the minimum, recomputed with the future-sent diff (§1.5 step 4)."""
    TOPIC_NOT_ALLOWED = "topic_not_allowed"
    """Topic outside the subset-archiving allow-list (the analogue of §1.5 step 5)."""
    MALFORMED = "malformed"
    """Not a canonical 5-item RLP envelope (§1.1), or a batch that breaks the API's limits."""
    ARCHIVE_REFUSED = "archive_refused"
    """The archive reported the item invalid (inconsistent fields it checks again); nothing was written."""
    PAST_RETENTION = "past_retention"
    """Valid on the wire, but sent + retention is already past: the archive did not write it (it would be
    invisible at once)."""


#: The faults status-go counts in ``waku_envelopes_cache_failures_total{type}``.
STATUS_GO_FAULTS = frozenset({Fault.IN_FUTURE, Fault.VERY_OLD, Fault.EXPIRED, Fault.OVERSIZED, Fault.LOW_POW})


@dataclass(frozen=True, slots=True)
class Accepted:
    """An envelope that passed validation, ready for the archive."""

    envelope: Envelope
    """The decoded envelope; ``raw`` is the exact bytes received and ``hash`` their keccak256."""
    pow: float
    """Its PoW with diff = 0, as the archive stores it (protocol-notes §1.3)."""
    message_hash: bytes
    """14/WAKU2 hash of the message it carries under the v1 -> v2 mapping
    (docs/design.md "Mapping onto Waku v1")."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """One refused envelope of a batch."""

    index: int
    """Zero-based position in the batch."""
    hash: bytes
    """keccak256 of the raw bytes (computed even when malformed)."""
    fault: Fault
    """The rule it broke."""
    detail: str
    """Human-readable explanation, at most 256 bytes."""


class ItemOutcome(enum.Enum):
    """What happened to one envelope of a batch."""

    ACCEPTED = "accepted"
    """Newly archived."""
    DUPLICATE = "duplicate"
    """Already archived, or repeated earlier in the batch; nothing written."""
    REJECTED = "rejected"
    """Refused; a :class:`Rejection` says why."""


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """The acknowledgement of one batch: ``accepted + duplicates + len(rejections) == len(batch)``."""

    outcomes: tuple[ItemOutcome, ...]
    """One outcome per envelope, in batch order."""
    rejections: tuple[Rejection, ...]
    """One entry per REJECTED envelope, in batch order."""
    hashes: tuple[bytes, ...]
    """Envelope hash of each envelope, in batch order."""

    @property
    def accepted(self) -> int:
        """Envelopes newly archived."""
        return self.outcomes.count(ItemOutcome.ACCEPTED)

    @property
    def duplicates(self) -> int:
        """Envelopes already archived or repeated in the batch."""
        return self.outcomes.count(ItemOutcome.DUPLICATE)


class ArchiveUnavailable(Unavailable):
    """The archive could not durably accept a write (down, timed out, overloaded); retry the batch."""

    default_message = "archive unavailable"


class ShuttingDown(Unavailable):
    """Ingest is draining for shutdown and takes no new envelopes; retry on another instance."""

    default_message = "ingest is shutting down"
