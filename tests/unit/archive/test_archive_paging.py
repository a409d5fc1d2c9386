"""A QueryEnvelopes page under a byte budget, against the in-memory reference store."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest

from archivestore.retention import RetentionPolicy
from archivestore.types import Direction, Position, PutItem, Query, QueryPage, StoredEnvelope
from services.archive.errors import ResponseTooLarge
from services.archive.paging import NOMINAL_ENVELOPE_BYTES, Budget, first_chunk, read_packed, read_page
from tests.integration.archive.model import ModelStore
from wakucodec.bloom import FULL_BLOOM
from wakucodec.envelope import make_envelope

BASE = 1_700_000_000
TOPIC = bytes.fromhex("01020304")
WIDE = Budget(rlp_bytes=10**9, wire_bytes=10**9)


class CountingStore(ModelStore):
    """The reference store, recording the limit of every query it answers."""

    def __init__(self) -> None:
        super().__init__(RetentionPolicy(default_s=None))
        self.limits: list[int] = []

    async def query(self, query: Query, *, now: int) -> QueryPage:
        self.limits.append(query.limit)
        return await super().query(query, now=now)


def stored(i: int, size: int) -> StoredEnvelope:
    data = (hashlib.sha256(str(i).encode()).digest() * (size // 32 + 1))[:size]
    e = make_envelope(expiry=BASE + i + 50, ttl=50, topic=TOPIC, data=data, nonce=i)
    return StoredEnvelope(e.sent, e.hash, e.topic, e.expiry, e.raw)


async def filled(sizes: Sequence[int]) -> tuple[CountingStore, list[StoredEnvelope]]:
    store = CountingStore()
    envs = [stored(i, size) for i, size in enumerate(sizes)]
    await store.put([PutItem(e) for e in envs], now=BASE)
    return store, sorted(envs, key=lambda e: (e.sent, e.hash))


def query(limit: int, direction: Direction = Direction.FORWARD, after: Position | None = None) -> Query:
    return Query(BASE - 10, BASE + 10_000, limit, bloom=FULL_BLOOM, after=after, direction=direction)


@pytest.fixture(params=["objects", "packed"])
def reader(request: pytest.FixtureRequest) -> str:
    """Every test runs against read_page (message views) and read_packed (ENVELOPE_VIEW_PACKED)."""
    return str(request.param)


async def page(
    store: CountingStore, q: Query, budget: Budget, reader: str
) -> tuple[list[bytes], bool, Position | None]:
    if reader == "packed":
        columns = await read_packed(store, q, now=BASE, budget=budget, overhead=0)
        return list(columns.hashes), columns.has_more, columns.last
    got = await read_page(
        store, q, now=BASE, budget=budget, convert=lambda e: e, wire_size=lambda e: len(e.raw)
    )
    return [e.hash for e in got.items], got.has_more, got.last


def test_first_chunk_assumes_one_kib_envelopes() -> None:
    assert NOMINAL_ENVELOPE_BYTES == 1024
    assert first_chunk(1000, 3 * 1024 * 1024) == 1000
    assert first_chunk(1000, 1024 * 1024) == 1000
    assert first_chunk(1000, 10 * 1024) == 10
    assert first_chunk(1000, 10) == 1
    assert first_chunk(5, 10**9) == 5


async def test_a_typical_page_is_one_store_query(reader: str) -> None:
    store, envs = await filled([900] * 30)
    hashes, more, last = await page(store, query(20), Budget(rlp_bytes=1024 * 1024, wire_bytes=10**9), reader)
    assert hashes == [e.hash for e in envs[:20]] and more
    assert last == Position(envs[19].sent, envs[19].hash)
    assert store.limits == [20]
    hashes, more, last = await page(store, query(1000), WIDE, reader)
    assert hashes == [e.hash for e in envs] and not more and last == Position(envs[-1].sent, envs[-1].hash)


async def test_the_rlp_budget_ends_the_page_early_with_has_more(reader: str) -> None:
    store, envs = await filled([1000] * 10)
    rlp = len(envs[0].raw)
    hashes, more, last = await page(
        store, query(100), Budget(rlp_bytes=3 * rlp + 1, wire_bytes=10**9), reader
    )
    assert hashes == [e.hash for e in envs[:3]] and more and last == Position(envs[2].sent, envs[2].hash)
    hashes, more, _ = await page(store, query(100), Budget(rlp_bytes=1, wire_bytes=10**9), reader)
    assert hashes == [envs[0].hash] and more  # never empty while something matches
    backward = await page(
        store, query(100, Direction.BACKWARD), Budget(rlp_bytes=2 * rlp, wire_bytes=10**9), reader
    )
    assert backward[0] == [e.hash for e in envs[::-1][:2]] and backward[1]


async def test_small_envelopes_are_fetched_in_a_second_chunk(reader: str) -> None:
    store, envs = await filled([10] * 50)  # ~70-byte envelopes; the first query assumes 1 KiB each
    rlp = len(envs[0].raw)
    hashes, more, _ = await page(store, query(40), Budget(rlp_bytes=10 * 1024, wire_bytes=10**9), reader)
    assert hashes == [e.hash for e in envs[:40]] and more
    assert store.limits[0] == 10 and len(store.limits) == 2 and sum(store.limits) == 40
    store.limits.clear()
    hashes, more, _ = await page(store, query(1000), Budget(rlp_bytes=45 * rlp, wire_bytes=10**9), reader)
    assert hashes == [e.hash for e in envs[:45]] and more
    hashes, more, _ = await page(store, query(1000), Budget(rlp_bytes=50 * rlp, wire_bytes=10**9), reader)
    assert hashes == [e.hash for e in envs] and not more


async def test_the_wire_budget_applies_too_and_an_envelope_too_big_for_a_message_fails(reader: str) -> None:
    store, envs = await filled([500] * 5)
    rlp = len(envs[0].raw)
    hashes, more, _ = await page(store, query(5), Budget(rlp_bytes=10**9, wire_bytes=2 * rlp), reader)
    assert len(hashes) == 2 and more
    with pytest.raises(ResponseTooLarge, match="ENVELOPE_VIEW_NO_DATA"):
        await page(store, query(5), Budget(rlp_bytes=10**9, wire_bytes=rlp - 1), reader)


async def test_resuming_after_a_position_and_an_empty_result(reader: str) -> None:
    store, envs = await filled([100] * 6)
    after = Position(envs[2].sent, envs[2].hash[:16])
    hashes, more, last = await page(store, query(10, after=after), WIDE, reader)
    assert hashes == [e.hash for e in envs[3:]] and not more and last is not None
    nothing = await page(store, query(10, after=Position(envs[-1].sent, envs[-1].hash)), WIDE, reader)
    assert nothing == ([], False, None)


async def test_packed_overhead_counts_against_the_wire_budget() -> None:
    store, envs = await filled([100] * 6)
    rlp = len(envs[0].raw)
    wire = Budget(rlp_bytes=10**9, wire_bytes=3 * (rlp + 40))
    columns = await read_packed(store, query(6), now=BASE, budget=wire, overhead=40)
    assert list(columns.hashes) == [e.hash for e in envs[:3]] and columns.has_more
    assert columns.sizes == [rlp] * 3 and columns.sents == [e.sent for e in envs[:3]]
    with pytest.raises(ResponseTooLarge):
        await read_packed(store, query(6), now=BASE, budget=Budget(10**9, rlp + 39), overhead=40)
