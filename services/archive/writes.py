"""PutEnvelopes as domain logic: one batch of checked items in, one outcome per item out (no gRPC, no driver).

The servicer turns each request item into a :class:`Candidate` (an envelope that passed the integrity gate of
:mod:`~services.archive.validation`, or why it did not) and hands the batch to :func:`write_batch`, which

- sends every distinct envelope hash to the store once (a batch may repeat an envelope: a peer relayed it
  twice before ingest's de-duplication saw it), in one ``put`` call;
- reports each item in request order: the store's INSERTED / DUPLICATE / EXPIRED for the first item of a hash,
  DUPLICATE for a repeat of a stored or already-present one (the envelope is archived either way), and the
  first item's own INVALID / EXPIRED for a repeat of a refused one (it is not archived either way).

Storage errors propagate from ``put`` untouched: the caller translates them (nothing was acknowledged).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from archivestore.types import PutItem, PutOutcome, PutResult, StoredEnvelope

__all__ = [
    "EXPIRED_DETAIL",
    "Accepted",
    "Candidate",
    "ItemResult",
    "Refused",
    "WriteOutcome",
    "WriteReport",
    "write_batch",
]

EXPIRED_DETAIL = "expired: sent time + retention is already past, so the envelope was not archived"


class WriteOutcome(enum.Enum):
    """What PutEnvelopes did with one item (archive.proto ``PutOutcome``)."""

    INSERTED = "inserted"
    DUPLICATE = "duplicate"
    INVALID = "invalid"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Accepted:
    """An item that passed the integrity gate: the row to store, its Go size, its retention override."""

    envelope: StoredEnvelope
    size: int  # 20 + len(Data): what mailserver_archived_envelope_size_bytes observes (status-go)
    retention_s: int | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """An item the integrity gate refused: the hash as given and why (PutResult.detail, <= 256 bytes)."""

    hash: bytes
    detail: str


Candidate = Accepted | Refused


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The outcome of one request item."""

    hash: bytes
    outcome: WriteOutcome
    detail: str = ""


@dataclass(frozen=True, slots=True)
class WriteReport:
    """Per-item results in request order; for metrics, how many went to the store and the sizes inserted."""

    results: list[ItemResult]
    stored: int
    inserted_sizes: list[int]

    def count(self, outcome: WriteOutcome) -> int:
        """How many items ended with ``outcome``."""
        return sum(1 for r in self.results if r.outcome is outcome)


_FROM_STORE = {
    PutOutcome.INSERTED: WriteOutcome.INSERTED,
    PutOutcome.DUPLICATE: WriteOutcome.DUPLICATE,
    PutOutcome.EXPIRED: WriteOutcome.EXPIRED,
}


async def write_batch(
    candidates: Sequence[Candidate], put: Callable[[list[PutItem]], Awaitable[PutResult]]
) -> WriteReport:
    """Store the accepted candidates (each hash once) with ``put``; one :class:`ItemResult` per candidate."""
    results: list[ItemResult | None] = [None] * len(candidates)
    first: dict[bytes, int] = {}  # hash -> index of the item that goes to the store
    repeats: dict[int, int] = {}  # index -> index of the first item with the same hash
    batch: list[tuple[int, Accepted]] = []
    for i, candidate in enumerate(candidates):
        if isinstance(candidate, Refused):
            results[i] = ItemResult(candidate.hash, WriteOutcome.INVALID, candidate.detail)
            continue
        h = candidate.envelope.hash
        if h in first:
            repeats[i] = first[h]
            continue
        first[h] = i
        batch.append((i, candidate))
    sizes: list[int] = []
    if batch:
        stored = await put([PutItem(c.envelope, c.retention_s) for _, c in batch])
        for (i, c), outcome in zip(batch, stored.outcomes, strict=True):
            mapped = _FROM_STORE[outcome]
            detail = EXPIRED_DETAIL if mapped is WriteOutcome.EXPIRED else ""
            results[i] = ItemResult(c.envelope.hash, mapped, detail)
            if mapped is WriteOutcome.INSERTED:
                sizes.append(c.size)
    for i, j in repeats.items():
        original = results[j]
        assert original is not None
        not_archived = original.outcome in (WriteOutcome.INVALID, WriteOutcome.EXPIRED)
        results[i] = original if not_archived else ItemResult(original.hash, WriteOutcome.DUPLICATE)
    final = [r for r in results if r is not None]
    assert len(final) == len(candidates)
    return WriteReport(final, len(batch), sizes)
