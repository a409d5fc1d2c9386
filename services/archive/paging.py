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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Generic, TypeVar

from archivestore.protocol import ArchiveStore
from archivestore.types import PackedPage, Position, Query, StoredEnvelope
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
C = TypeVar("C")

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


@dataclass(slots=True)
class _Taken:
    """What a ``take`` step kept of one store chunk: how many envelopes, their RLP and wire bytes, and the
    position of the last one kept."""

    count: int
    rlp: int
    wire: int
    last: Position | None


async def _read_chunks(
    query: Query,
    budget: Budget,
    fetch: Callable[[Query], Awaitable[tuple[C, int, bool]]],
    take: Callable[[C, int, int, bool], _Taken],
) -> tuple[bool, Position | None]:
    """The chunk loop both views share: ask the store for a chunk, keep what fits, continue after the last
    one kept with a chunk sized from the average so far, until the limit, the budget or the matches run out.

    ``fetch(q)`` returns a chunk, its length and the store's ``has_more``; ``take(chunk, rlp_left, wire_left,
    first)`` keeps the leading envelopes that fit (at least one when ``first``, i.e. nothing kept yet).
    Returns ``has_more`` and the position of the last envelope kept.
    """
    rlp_used = wire_used = kept = 0
    last = None
    remaining = query.limit
    chunk = first_chunk(query.limit, budget.rlp_bytes)
    after = query.after
    while True:
        got, n, store_more = await fetch(dataclasses.replace(query, limit=min(chunk, remaining), after=after))
        step = take(got, budget.rlp_bytes - rlp_used, budget.wire_bytes - wire_used, kept == 0)
        rlp_used += step.rlp
        wire_used += step.wire
        kept += step.count
        if step.last is not None:
            last = step.last
        if step.count < n:
            return True, last  # the next envelope did not fit: provably one more
        remaining -= n
        if not store_more or n == 0:
            return False, last
        if remaining <= 0 or rlp_used >= budget.rlp_bytes:
            return True, last  # the store said more match; none fits here
        after = last
        average = max(1.0, rlp_used / kept)
        chunk = max(1, math.ceil((budget.rlp_bytes - rlp_used) / average))


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

    async def fetch(q: Query) -> tuple[list[StoredEnvelope], int, bool]:
        page = await store.query(q, now=now)
        return page.envelopes, len(page.envelopes), page.has_more

    def take(envelopes: list[StoredEnvelope], rlp_left: int, wire_left: int, first: bool) -> _Taken:
        rlp = wire = count = 0
        last = None
        for envelope in envelopes:
            item = convert(envelope)
            size = wire_size(item)
            if not (first and count == 0):
                if rlp + len(envelope.raw) > rlp_left or wire + size > wire_left:
                    break
            elif size > wire_left:
                raise ResponseTooLarge(size, wire_left)
            items.append(item)
            rlp += len(envelope.raw)
            wire += size
            count += 1
            last = envelope
        return _Taken(count, rlp, wire, _position(last))

    has_more, last = await _read_chunks(query, budget, fetch, take)
    return Page(items, has_more, last)


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

    async def fetch(q: Query) -> tuple[PackedPage, int, bool]:
        page = await store.query_packed(q, now=now)
        return page, len(page.raws), page.has_more

    def take(page: PackedPage, rlp_left: int, wire_left: int, first: bool) -> _Taken:
        sizes = list(map(len, page.raws))
        fit = _fitting(sizes, rlp_left, wire_left, overhead)
        if first and sizes and fit == 0:
            if sizes[0] + overhead > wire_left:
                raise ResponseTooLarge(sizes[0] + overhead, wire_left)
            fit = 1  # at least one envelope whenever one matches, even past the RLP budget
        out.raws.extend(page.raws[:fit])
        out.sizes.extend(sizes[:fit])
        out.sents.extend(page.sents[:fit])
        out.hashes.extend(page.hashes[:fit])
        added = sum(sizes[:fit])
        return _Taken(fit, added, added + fit * overhead, out.last if fit else None)

    out.has_more, _ = await _read_chunks(query, budget, fetch, take)
    return out


def _fitting(sizes: list[int], rlp_left: int, wire_left: int, overhead: int) -> int:
    """How many leading envelopes fit both what is left of the RLP budget and of the wire budget."""
    rlp = list(accumulate(sizes))
    by_rlp = bisect_right(rlp, rlp_left)
    # wire(i) = rlp[i] + (i + 1) * overhead is increasing too, so the same bisection applies to it.
    wire = [r + (i + 1) * overhead for i, r in enumerate(rlp[:by_rlp])]
    return bisect_right(wire, wire_left)


def _position(envelope: StoredEnvelope | None) -> Position | None:
    return None if envelope is None else Position(envelope.sent, envelope.hash)
