"""One QueryEnvelopes page under a byte budget, read from the store in as few queries as possible.

The storage protocol pages by count only, so the byte budget is applied here: envelopes are taken in order
until the next one would push the sum of RLP sizes past ``max_bytes`` or the encoded response past the gRPC
message limit; the page then ends early with ``has_more`` (there is provably one more: the one left out).
At least one envelope is returned whenever one matches.

The store is asked for ``min(limit, budget / NOMINAL_ENVELOPE_BYTES)`` envelopes first (1 KiB is the common
Status message), so a typical page is one store query; if the envelopes turn out smaller than that, the
rest is fetched after the last one with a chunk sized from the average seen so far.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Generic, TypeVar

from archivestore.protocol import ArchiveStore
from archivestore.types import Position, Query, StoredEnvelope
from services.archive.errors import ResponseTooLarge

__all__ = [
    "NOMINAL_ENVELOPE_BYTES",
    "Budget",
    "PackedColumns",
    "Page",
    "first_chunk",
    "read_packed",
    "read_page",
]

T = TypeVar("T")

#: Size assumed for the first store query of a page (bytes of RLP per envelope).
NOMINAL_ENVELOPE_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one page: the caller's RLP byte budget and the encoded-size ceiling of the response."""

    rlp_bytes: int
    wire_bytes: int


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """Converted envelopes in order, whether more match, and the position of the last one."""

    items: list[T]
    has_more: bool
    last: Position | None


def first_chunk(limit: int, rlp_budget: int) -> int:
    """How many envelopes the first store query of a page asks for."""
    return max(1, min(limit, math.ceil(rlp_budget / NOMINAL_ENVELOPE_BYTES)))


async def read_page(
    store: ArchiveStore,
    query: Query,
    *,
    now: int,
    budget: Budget,
    convert: Callable[[StoredEnvelope], T],
    wire_size: Callable[[T], int],
) -> Page[T]:
    """Up to ``query.limit`` matching envelopes, converted, within ``budget`` (see the module docstring).

    Raises :class:`ResponseTooLarge` when the first matching envelope alone exceeds ``budget.wire_bytes``.
    """
    items: list[T] = []
    rlp_used = wire_used = 0
    last: StoredEnvelope | None = None
    remaining = query.limit
    chunk = first_chunk(query.limit, budget.rlp_bytes)
    after = query.after
    while True:
        page = await store.query(
            dataclasses.replace(query, limit=min(chunk, remaining), after=after), now=now
        )
        for envelope in page.envelopes:
            item = convert(envelope)
            size = wire_size(item)
            if items and (
                rlp_used + len(envelope.raw) > budget.rlp_bytes or wire_used + size > budget.wire_bytes
            ):
                return Page(items, True, _position(last))
            if size > budget.wire_bytes:
                raise ResponseTooLarge(size, budget.wire_bytes)
            items.append(item)
            rlp_used += len(envelope.raw)
            wire_used += size
            last = envelope
        remaining -= len(page.envelopes)
        if not page.has_more or not page.envelopes:
            return Page(items, False, _position(last))
        if remaining <= 0 or rlp_used >= budget.rlp_bytes:
            return Page(items, True, _position(last))  # the store said more match; none fits here
        assert last is not None
        after = Position(last.sent, last.hash)
        average = max(1.0, rlp_used / len(items))
        chunk = max(1, math.ceil((budget.rlp_bytes - rlp_used) / average))


@dataclass(slots=True)
class PackedColumns:
    """A page as columns (ENVELOPE_VIEW_PACKED), whether more match, and the position of the last one."""

    raws: list[bytes]
    sizes: list[int]
    sents: list[int]
    hashes: list[bytes]
    has_more: bool = False

    @property
    def last(self) -> Position | None:
        """Position of the last envelope; None when the page is empty."""
        return Position(self.sents[-1], self.hashes[-1]) if self.sents else None


async def read_packed(
    store: ArchiveStore, query: Query, *, now: int, budget: Budget, overhead: int
) -> PackedColumns:
    """:func:`read_page` for the packed view: the same envelopes, selected column-wise.

    ``overhead`` is the encoded size of one envelope besides its RLP. The budget is applied with prefix
    sums and a bisection per store chunk instead of a loop over envelopes (the history hot path).
    """
    out = PackedColumns([], [], [], [])
    rlp_used = wire_used = 0
    remaining = query.limit
    chunk = first_chunk(query.limit, budget.rlp_bytes)
    after = query.after
    while True:
        page = await store.query_packed(
            dataclasses.replace(query, limit=min(chunk, remaining), after=after), now=now
        )
        sizes = list(map(len, page.raws))
        fit = _fitting(sizes, budget.rlp_bytes - rlp_used, budget.wire_bytes - wire_used, overhead)
        if not out.sizes and sizes and fit == 0:
            if sizes[0] + overhead > budget.wire_bytes:
                raise ResponseTooLarge(sizes[0] + overhead, budget.wire_bytes)
            fit = 1  # at least one envelope whenever one matches, even past the RLP budget
        out.raws.extend(page.raws[:fit])
        out.sizes.extend(sizes[:fit])
        out.sents.extend(page.sents[:fit])
        out.hashes.extend(page.hashes[:fit])
        added = sum(sizes[:fit])
        rlp_used += added
        wire_used += added + fit * overhead
        if fit < len(sizes):
            out.has_more = True
            return out
        remaining -= len(sizes)
        if not page.has_more or not sizes:
            return out
        if remaining <= 0 or rlp_used >= budget.rlp_bytes:
            out.has_more = True  # the store said more match; none fits here
            return out
        after = Position(out.sents[-1], out.hashes[-1])
        average = max(1.0, rlp_used / len(out.sizes))
        chunk = max(1, math.ceil((budget.rlp_bytes - rlp_used) / average))


def _fitting(sizes: list[int], rlp_left: int, wire_left: int, overhead: int) -> int:
    """How many leading envelopes fit both what is left of the RLP budget and of the wire budget."""
    rlp = list(accumulate(sizes))
    by_rlp = bisect_right(rlp, rlp_left)
    # wire(i) = rlp[i] + (i + 1) * overhead is increasing too, so the same bisection applies to it.
    wire = [r + (i + 1) * overhead for i, r in enumerate(rlp[:by_rlp])]
    return bisect_right(wire, wire_left)


def _position(envelope: StoredEnvelope | None) -> Position | None:
    return None if envelope is None else Position(envelope.sent, envelope.hash)
