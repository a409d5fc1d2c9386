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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from archivestore.protocol import ArchiveStore
from archivestore.types import Position, Query, StoredEnvelope
from services.archive.errors import ResponseTooLarge

__all__ = ["NOMINAL_ENVELOPE_BYTES", "Budget", "Page", "first_chunk", "read_page"]

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


def _position(envelope: StoredEnvelope | None) -> Position | None:
    return None if envelope is None else Position(envelope.sent, envelope.hash)
