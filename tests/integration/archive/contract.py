"""The storage contract every archive adapter passes.

Sources: docs/archive.md; docs/protocol-notes.md §4.2-4.6 (query semantics) and §7.3 (pagination vector).

Bind it by subclassing :class:`ArchiveContract` in a ``test_*`` module and providing one fixture::

    class TestMyStore(ArchiveContract):
        BUCKET_SECONDS = 3600  # the adapter's time-bucket width

        @pytest.fixture
        async def make_store(self, tmp_path) -> AsyncIterator[StoreFactory]:
            ...  # yield an async factory opening a store on this test's own, initially empty location

``make_store(retention=...)`` opens (and the binding later closes) a store on the *same* location every time
it is called within one test, so calling it again after ``close()`` is a reopen. The ``store`` fixture is
``await make_store()`` with keep-forever retention; a binding may override it.

Time: envelopes are sent around ``BASE`` (fixed, so expected pages are exact) and queries stay within a few
days of it, because a partitioned backend pays per day or bucket in the range. Tests of retention use the
wall clock instead (a backend may turn retention into a real TTL) and pass ``now`` explicitly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import random
import time
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archivestore.protocol import ArchiveStore
from archivestore.retention import RetentionPolicy
from archivestore.types import (
    Direction,
    ExpireRequest,
    Position,
    PutItem,
    PutOutcome,
    Query,
    QueryPage,
    ShardPlanEntry,
    StoredEnvelope,
)
from tests.integration.archive.model import ModelStore
from wakucodec.bloom import FULL_BLOOM, bloom_match, topic_to_bloom, topics_to_bloom
from wakucodec.envelope import decode_envelope, make_envelope

BASE = 1_700_000_000  # 2023-11-14T22:13:20Z
DAY = 86_400
TTL = 50
KEEP = RetentionPolicy(default_s=None)
MODEL_EXAMPLES = 25  # hypothesis examples of the model comparison (each a few puts and paginated queries)
TIME_TABLE = "envelopes_by_time"
TOPIC_TABLE = "envelopes_by_topic"

# Topics with known Go blooms (docs/protocol-notes.md §7.2) plus a few more.
A = bytes.fromhex("f26e7779")
B = bytes.fromhex("aabbccdd")
C = bytes.fromhex("0000ff06")
D = bytes.fromhex("01020300")
E = bytes.fromhex("deadbeef")
TOPICS = (A, B, C, D, E)
UNUSED = bytes.fromhex("7e7e7e01")  # never stored; its bloom matches none of TOPICS (asserted where used)

INS, DUP, EXP = PutOutcome.INSERTED, PutOutcome.DUPLICATE, PutOutcome.EXPIRED
FWD, BWD = Direction.FORWARD, Direction.BACKWARD


class StoreFactory(Protocol):
    """Opens an adapter on the current test's location (see the module docstring)."""

    def __call__(self, *, retention: RetentionPolicy = KEEP) -> Awaitable[ArchiveStore]: ...


def env(
    sent: int, topic: bytes = A, n: int = 0, *, size: int = 48, message_hash: bytes | None = None
) -> StoredEnvelope:
    """A real envelope (wakucodec RLP, keccak hash) sent at ``sent``; ``n`` and ``size`` vary the bytes."""
    seed = hashlib.sha256(f"{sent}/{topic.hex()}/{n}".encode()).digest()
    data = (seed * (size // 32 + 1))[:size]
    e = make_envelope(expiry=sent + TTL, ttl=TTL, topic=topic, data=data, nonce=n)
    return StoredEnvelope(e.sent, e.hash, e.topic, e.expiry, e.raw, message_hash)


def items(envs: Sequence[StoredEnvelope]) -> list[PutItem]:
    """Wrap envelopes as put items without retention overrides."""
    return [PutItem(e) for e in envs]


def ordered(envs: Sequence[StoredEnvelope], direction: Direction = FWD) -> list[StoredEnvelope]:
    """Unique envelopes in archive order."""
    unique = {e.hash: e for e in envs}
    return sorted(unique.values(), key=lambda e: (e.sent, e.hash), reverse=direction is BWD)


def q(
    lower: int = BASE - DAY,
    upper: int = BASE + DAY,
    *,
    limit: int = 1000,
    topics: Sequence[bytes] = (),
    bloom: bytes | None = None,
    after: Position | None = None,
    direction: Direction = FWD,
) -> Query:
    """A query with the contract's default window around BASE."""
    return Query(lower, upper, limit, frozenset(topics), bloom, after, direction)


def cursor_of(envelope: StoredEnvelope) -> Position:
    """What the 36-byte history cursor carries: sent and the first 16 hash bytes."""
    return Position(envelope.sent, envelope.hash[:16])


async def paginate(
    store: ArchiveStore, query: Query, *, now: int = BASE, max_pages: int = 500
) -> list[QueryPage]:
    """Follow ``has_more`` with 16-byte-prefix positions; asserts every non-final page is full."""
    pages: list[QueryPage] = []
    after = query.after
    while True:
        page = await store.query(
            Query(query.lower, query.upper, query.limit, query.topics, query.bloom, after, query.direction),
            now=now,
        )
        pages.append(page)
        if not page.has_more:
            return pages
        assert len(page.envelopes) == query.limit, "a page with more after it must be full"
        after = cursor_of(page.envelopes[-1])
        assert len(pages) < max_pages, "pagination does not terminate"


def flatten(pages: Sequence[QueryPage]) -> list[StoredEnvelope]:
    """All envelopes of all pages in delivery order."""
    return [e for p in pages for e in p.envelopes]


def wall_now() -> int:
    """The real clock, for tests whose data a backend may expire with real TTLs."""
    return int(time.time())


class ArchiveContract:
    """Behaviour every :class:`~archivestore.protocol.ArchiveStore` adapter must show."""

    #: Width of the adapter's time buckets (``envelopes_by_time``), as configured by the binding.
    BUCKET_SECONDS = 3600
    #: Whether ``BucketInfo.size_bytes`` is the exact sum of raw envelope sizes (False: an estimate).
    EXACT_BUCKET_SIZES = True

    @pytest.fixture
    async def store(self, make_store: StoreFactory) -> ArchiveStore:
        """A store with keep-forever retention on this test's location."""
        return await make_store()

    # ------------------------------------------------------------------ put / get / contains

    async def test_put_then_get_round_trips_the_exact_envelope(self, store: ArchiveStore) -> None:
        envs = [
            env(BASE, A, 0),
            env(BASE + 1, B, 1, size=700),
            env(BASE + 1, C, 2, message_hash=b"\x11" * 32),
        ]
        result = await store.put(items(envs), now=BASE)
        assert result.outcomes == (INS, INS, INS)
        assert (result.inserted, result.duplicates) == (3, 0)
        for e in envs:
            got = await store.get(envelope_hash=e.hash, now=BASE)
            assert got is not None and got == e
            assert decode_envelope(got.raw).hash == e.hash  # raw bytes are the ones archived, byte for byte
        assert await store.get(message_hash=b"\x11" * 32, now=BASE) == envs[2]
        assert await store.get(envelope_hash=b"\x00" * 32, now=BASE) is None
        assert await store.get(message_hash=b"\x22" * 32, now=BASE) is None

    async def test_contains_answers_per_hash_in_order(self, store: ArchiveStore) -> None:
        a, b = env(BASE, A, message_hash=b"\x33" * 32), env(BASE + 5, B)
        await store.put(items([a, b]), now=BASE)
        absent = b"\x44" * 32
        asked = [b.hash, absent, a.hash, b"\x33" * 32, b.hash]
        assert await store.contains(asked, now=BASE) == [True, False, True, True, True]
        assert await store.contains([], now=BASE) == []

    async def test_empty_put_is_a_no_op(self, store: ArchiveStore) -> None:
        assert (await store.put([], now=BASE)).outcomes == ()
        assert (await store.stats(now=BASE)).envelopes == 0

    async def test_reingest_is_idempotent(self, store: ArchiveStore) -> None:
        envs = [env(BASE + i % 7, TOPICS[i % 3], i) for i in range(30)]
        assert (await store.put(items(envs), now=BASE)).inserted == 30
        before = await store.stats(now=BASE)
        again = await store.put(items(list(reversed(envs))), now=BASE)
        assert again.outcomes == (DUP,) * 30
        after = await store.stats(now=BASE)
        assert (after.envelopes, after.topics, after.oldest_sent, after.newest_sent) == (
            before.envelopes,
            before.topics,
            before.oldest_sent,
            before.newest_sent,
        )
        assert flatten(await paginate(store, q(topics=TOPICS))) == ordered(envs)

    async def test_duplicates_inside_one_batch_count_once(self, store: ArchiveStore) -> None:
        a, b, c = env(BASE, A, 1), env(BASE, A, 2), env(BASE + 1, B, 3)
        result = await store.put(items([a, b, a, c, b, a]), now=BASE)
        assert result.outcomes == (INS, INS, DUP, INS, DUP, DUP)
        assert (await store.stats(now=BASE)).envelopes == 3

    async def test_stats_counts_envelopes_topics_and_span(self, store: ArchiveStore) -> None:
        empty = await store.stats(now=BASE)
        assert (empty.envelopes, empty.topics, empty.oldest_sent, empty.newest_sent) == (0, 0, None, None)
        assert empty.backend == store.backend
        await store.put(
            items([env(BASE + 9, A), env(BASE - 3, B), env(BASE, B, 1), env(BASE + 2, C)]), now=BASE
        )
        stats = await store.stats(now=BASE)
        assert (stats.envelopes, stats.topics, stats.oldest_sent, stats.newest_sent) == (
            4,
            3,
            BASE - 3,
            BASE + 9,
        )

    # ------------------------------------------------------------------ query filters

    async def _seed_topics(self, store: ArchiveStore) -> list[StoredEnvelope]:
        envs = [env(BASE + i, TOPICS[i % len(TOPICS)], i) for i in range(25)]
        await store.put(items(envs), now=BASE)
        return envs

    async def test_topics_filter_returns_exactly_those_topics_in_order(self, store: ArchiveStore) -> None:
        envs = await self._seed_topics(store)
        page = await store.query(q(topics=[A, C]), now=BASE)
        assert page.envelopes == ordered([e for e in envs if e.topic in (A, C)])
        assert not page.has_more
        page = await store.query(q(topics=[UNUSED]), now=BASE)
        assert (page.envelopes, page.has_more) == ([], False)

    async def test_topics_override_bloom(self, store: ArchiveStore) -> None:
        envs = await self._seed_topics(store)
        page = await store.query(q(topics=[B], bloom=topic_to_bloom(A)), now=BASE)
        assert page.envelopes == ordered([e for e in envs if e.topic == B])

    async def test_bloom_filter_uses_go_topic_blooms(self, store: ArchiveStore) -> None:
        envs = await self._seed_topics(store)
        bloom = topics_to_bloom([A, D])
        expected = ordered([e for e in envs if bloom_match(bloom, topic_to_bloom(e.topic))])
        assert {e.topic for e in expected} >= {A, D}
        assert (await store.query(q(bloom=bloom), now=BASE)).envelopes == expected
        # 01020300's Go bloom is a single bit (assignment quirk, protocol-notes §1.4): a bloom with just that
        # bit matches it.
        single = bytes([0x08]) + bytes(63)
        assert single == topic_to_bloom(D)
        got = (await store.query(q(bloom=single), now=BASE)).envelopes
        assert got == ordered([e for e in envs if bloom_match(single, topic_to_bloom(e.topic))])
        assert D in {e.topic for e in got}

    async def test_full_bloom_matches_everything(self, store: ArchiveStore) -> None:
        envs = await self._seed_topics(store)
        assert (await store.query(q(bloom=FULL_BLOOM), now=BASE)).envelopes == ordered(envs)

    async def test_bloom_matching_no_stored_topic_returns_nothing(self, store: ArchiveStore) -> None:
        await self._seed_topics(store)
        bloom = topic_to_bloom(UNUSED)
        assert not any(bloom_match(bloom, topic_to_bloom(t)) for t in TOPICS)
        page = await store.query(q(bloom=bloom), now=BASE)
        assert (page.envelopes, page.has_more) == ([], False)

    async def test_query_without_topics_or_bloom_is_rejected(self, store: ArchiveStore) -> None:
        with pytest.raises(ValueError):
            await store.query(q(), now=BASE)
        with pytest.raises(ValueError):
            await store.query(q(topics=[A], limit=0), now=BASE)

    @pytest.mark.parametrize("direction", [FWD, BWD])
    async def test_bounds_are_inclusive_at_both_edges(
        self, store: ArchiveStore, direction: Direction
    ) -> None:
        envs = [env(BASE + s, A, n) for s in range(10) for n in range(2)]
        await store.put(items(envs), now=BASE)
        for lower, upper in [
            (BASE + 3, BASE + 6),
            (BASE + 4, BASE + 4),
            (BASE, BASE + 9),
            (BASE + 9, BASE + 20),
        ]:
            page = await store.query(q(lower, upper, topics=[A], direction=direction), now=BASE)
            assert page.envelopes == ordered([e for e in envs if lower <= e.sent <= upper], direction)
            page = await store.query(q(lower, upper, bloom=topic_to_bloom(A), direction=direction), now=BASE)
            assert page.envelopes == ordered([e for e in envs if lower <= e.sent <= upper], direction)

    async def test_lower_above_upper_is_an_empty_range(self, store: ArchiveStore) -> None:
        await self._seed_topics(store)
        page = await store.query(q(BASE + 5, BASE + 4, topics=TOPICS), now=BASE)
        assert (page.envelopes, page.has_more) == ([], False)

    async def test_backward_is_the_exact_reverse_of_forward(self, store: ArchiveStore) -> None:
        envs = await self._seed_topics(store)
        fwd = (await store.query(q(topics=TOPICS), now=BASE)).envelopes
        bwd = (await store.query(q(topics=TOPICS, direction=BWD), now=BASE)).envelopes
        assert fwd == ordered(envs) and bwd == list(reversed(fwd))
        limited = await store.query(q(topics=TOPICS, direction=BWD, limit=3), now=BASE)
        assert limited.envelopes == ordered(envs, BWD)[:3] and limited.has_more

    # ------------------------------------------------------------------ pagination

    @pytest.mark.parametrize("direction", [FWD, BWD])
    @pytest.mark.parametrize("kind", ["topics", "bloom", "full-bloom"])
    async def test_pagination_has_no_gaps_and_no_duplicates(
        self, store: ArchiveStore, direction: Direction, kind: str
    ) -> None:
        rng = random.Random(7)
        envs = [env(BASE + rng.randrange(40), rng.choice(TOPICS), n) for n in range(90)]
        await store.put(items(envs), now=BASE)
        if kind == "topics":
            query = q(BASE, BASE + 39, topics=[A, B, E], limit=7, direction=direction)
            expected = ordered([e for e in envs if e.topic in (A, B, E)], direction)
        elif kind == "bloom":
            bloom = topics_to_bloom([A, B, E])
            query = q(BASE, BASE + 39, bloom=bloom, limit=7, direction=direction)
            expected = ordered([e for e in envs if bloom_match(bloom, topic_to_bloom(e.topic))], direction)
        else:
            query = q(BASE, BASE + 39, bloom=FULL_BLOOM, limit=7, direction=direction)
            expected = ordered(envs, direction)
        pages = await paginate(store, query)
        assert len(pages) >= 5
        got = flatten(pages)
        assert len({e.hash for e in got}) == len(got), "duplicates across pages"
        assert got == expected, "gaps or wrong order across pages"

    @pytest.mark.parametrize("direction", [FWD, BWD])
    @pytest.mark.parametrize("kind", ["topics", "bloom", "full-bloom", "empty"])
    async def test_packed_query_is_the_same_page_as_columns(
        self, store: ArchiveStore, direction: Direction, kind: str
    ) -> None:
        rng = random.Random(11)
        envs = [env(BASE + rng.randrange(30), rng.choice(TOPICS), n) for n in range(40)]
        await store.put(items(envs), now=BASE)
        choices: dict[str, dict[str, Any]] = {
            "topics": {"topics": [A, E]},
            "bloom": {"bloom": topics_to_bloom([A, B])},
            "full-bloom": {"bloom": FULL_BLOOM},
            "empty": {"topics": [A], "lower": BASE + 1000, "upper": BASE + 2000},
        }
        filters = choices[kind]
        query = q(**{"lower": BASE, "upper": BASE + 29, "limit": 9, "direction": direction, **filters})
        while True:
            page = await store.query(query, now=BASE)
            packed = await store.query_packed(query, now=BASE)
            assert list(packed.raws) == [e.raw for e in page.envelopes]
            assert list(packed.sents) == [e.sent for e in page.envelopes]
            assert list(packed.hashes) == [e.hash for e in page.envelopes]
            assert packed.has_more == page.has_more
            if not page.has_more:
                break
            query = dataclasses.replace(
                query, after=Position(page.envelopes[-1].sent, page.envelopes[-1].hash)
            )

    async def test_last_full_page_reports_no_more(self, store: ArchiveStore) -> None:
        envs = [env(BASE + i, A, i) for i in range(12)]
        await store.put(items(envs), now=BASE)
        pages = await paginate(store, q(topics=[A], limit=4))
        assert [len(p.envelopes) for p in pages] == [4, 4, 4]
        assert [p.has_more for p in pages] == [True, True, False]

    @pytest.mark.parametrize("direction", [FWD, BWD])
    async def test_resume_from_hash_prefix_equals_resume_from_full_hash(
        self, store: ArchiveStore, direction: Direction
    ) -> None:
        envs = [env(BASE + i // 4, TOPICS[i % 2], i) for i in range(24)]
        await store.put(items(envs), now=BASE)
        for at in ordered(envs, direction):
            full = await store.query(
                q(topics=[A, B], limit=5, direction=direction, after=Position(at.sent, at.hash)), now=BASE
            )
            prefix = await store.query(
                q(topics=[A, B], limit=5, direction=direction, after=cursor_of(at)), now=BASE
            )
            by_bloom = await store.query(
                q(bloom=topics_to_bloom([A, B]), limit=5, direction=direction, after=cursor_of(at)), now=BASE
            )
            assert full == prefix == by_bloom  # only A and B are stored here, so the bloom query agrees

    @pytest.mark.parametrize("direction", [FWD, BWD])
    async def test_many_envelopes_in_the_same_second_page_by_hash(
        self, store: ArchiveStore, direction: Direction
    ) -> None:
        envs = [env(BASE, TOPICS[n % 3], n) for n in range(45)]
        await store.put(items(envs), now=BASE)
        pages = await paginate(store, q(BASE, BASE, topics=TOPICS[:3], limit=4, direction=direction))
        assert flatten(pages) == ordered(envs, direction)
        pages = await paginate(store, q(BASE, BASE, bloom=FULL_BLOOM, limit=6, direction=direction))
        assert flatten(pages) == ordered(envs, direction)

    async def test_status_go_pagination_vector(self, store: ArchiveStore) -> None:
        # docs/protocol-notes.md §7.3 (TestRequestPaginationLimit):
        # 10 envelopes at now-10 … now-1, limit 6.
        now = BASE
        envs = [env(now - 10 + i, A, i) for i in range(10)]
        await store.put(items(envs), now=now)
        query = q(now - 20, now + 60, topics=[A], limit=6)
        first = await store.query(query, now=now)
        assert first.envelopes == envs[:6] and first.has_more
        second = await store.query(
            Query(query.lower, query.upper, 6, query.topics, after=cursor_of(first.envelopes[-1])), now=now
        )
        assert second.envelopes == envs[6:] and not second.has_more

    # ------------------------------------------------------------------ retention

    async def test_short_retention_hides_envelopes_after_it_ends(self, make_store: StoreFactory) -> None:
        now = wall_now()
        store = await make_store(retention=RetentionPolicy(default_s=100))
        fresh = env(now - 10, A, 1)  # expires_at = now + 90
        assert (await store.put(items([fresh]), now=now)).outcomes == (INS,)
        for t, visible in [(now, True), (now + 89, True), (now + 90, False), (now + 500, False)]:
            assert (await store.get(envelope_hash=fresh.hash, now=t) is not None) is visible, t
            assert await store.contains([fresh.hash], now=t) == [visible]
            page = await store.query(q(now - 60, now, topics=[A]), now=t)
            assert page.envelopes == ([fresh] if visible else [])
            assert (await store.query(q(now - 60, now, bloom=FULL_BLOOM), now=t)).envelopes == page.envelopes
            assert (await store.stats(now=t)).envelopes == int(visible)

    async def test_envelope_already_past_retention_is_not_written(self, make_store: StoreFactory) -> None:
        now = wall_now()
        store = await make_store(retention=RetentionPolicy(default_s=100))
        stale, edge, ok = env(now - 500, A, 1), env(now - 100, A, 2), env(now - 99, A, 3)
        assert (await store.put(items([stale, edge, ok]), now=now)).outcomes == (EXP, EXP, INS)
        assert await store.get(envelope_hash=stale.hash, now=stale.sent) is None  # absent, not merely hidden
        assert await store.contains([edge.hash], now=edge.sent) == [False]
        assert (await store.stats(now=now - 1000)).envelopes == 1

    async def test_per_topic_and_per_item_retention(self, make_store: StoreFactory) -> None:
        now = wall_now()
        store = await make_store(retention=RetentionPolicy(default_s=1000, per_topic_s={B: 50}))
        a, b, c = env(now - 10, A, 1), env(now - 10, B, 2), env(now - 10, C, 3)
        result = await store.put([PutItem(a), PutItem(b), PutItem(c, retention_s=20)], now=now)
        assert result.outcomes == (INS, INS, INS)
        expected_at = {now: [a, b, c], now + 15: [a, b], now + 45: [a], now + 995: []}
        for t, visible in expected_at.items():
            page = await store.query(q(now - 60, now, topics=[A, B, C]), now=t)
            assert page.envelopes == ordered(visible), t
            assert (await store.stats(now=t)).envelopes == len(visible)
        late = env(now - 60, B, 4)  # past the 50 s topic retention, well within the global one
        assert (await store.put(items([late]), now=now)).outcomes == (EXP,)

    # ------------------------------------------------------------------ concurrency and durability

    async def test_concurrent_overlapping_writers_store_each_envelope_once(self, store: ArchiveStore) -> None:
        envs = [env(BASE + i % 50, TOPICS[i % 4], i) for i in range(240)]
        rng = random.Random(3)
        batches = [rng.sample(envs, 40) for _ in range(24)] + [envs[i : i + 60] for i in range(0, 240, 60)]
        results = await asyncio.gather(*(store.put(items(b), now=BASE) for b in batches))
        inserted: dict[bytes, int] = {}
        for batch, result in zip(batches, results, strict=True):
            assert len(result.outcomes) == len(batch)
            for e, outcome in zip(batch, result.outcomes, strict=True):
                assert outcome in (INS, DUP)
                inserted[e.hash] = inserted.get(e.hash, 0) + (outcome is INS)
        assert set(inserted.values()) == {1}, "every envelope inserted exactly once"
        assert (await store.stats(now=BASE)).envelopes == 240
        assert flatten(await paginate(store, q(bloom=FULL_BLOOM, limit=100))) == ordered(envs)

    async def test_acknowledged_data_survives_reopen(self, make_store: StoreFactory) -> None:
        store = await make_store()
        envs = [env(BASE + i, TOPICS[i % 5], i, size=200) for i in range(120)]
        for start in range(0, 120, 30):
            await store.put(items(envs[start : start + 30]), now=BASE)
        await store.put_shard_plan([ShardPlanEntry(TIME_TABLE, BASE // self.BUCKET_SECONDS, 1, 4)])
        await store.close()
        reopened = await make_store()
        assert flatten(await paginate(reopened, q(bloom=FULL_BLOOM, limit=50))) == ordered(envs)
        assert (await reopened.get(envelope_hash=envs[77].hash, now=BASE)) == envs[77]
        assert await reopened.get_shard_plan(TIME_TABLE) == [
            ShardPlanEntry(TIME_TABLE, BASE // self.BUCKET_SECONDS, 1, 4)
        ]
        assert (await reopened.put(items(envs[:5]), now=BASE)).outcomes == (DUP,) * 5

    # ------------------------------------------------------------------ maintenance

    async def test_expire_dry_run_counts_and_real_run_removes(self, store: ArchiveStore) -> None:
        hour = 3600
        envs = [env(BASE + h * hour + i, t, i) for h in range(6) for i, t in enumerate([A, B, C])]
        await store.put(items(envs), now=BASE)
        cutoff, b_cutoff = BASE + 3 * hour, BASE + 1 * hour  # B keeps longer, C shorter than the default
        c_cutoff = BASE + 5 * hour

        def doomed(e: StoredEnvelope) -> bool:
            return e.sent < {B: b_cutoff, C: c_cutoff}.get(e.topic, cutoff)

        expected_gone = [e for e in envs if doomed(e)]
        request = ExpireRequest(cutoff, {B: b_cutoff, C: c_cutoff}, dry_run=True)
        dry = await store.expire(request, now=BASE + 6 * hour)
        assert (dry.envelopes, dry.dry_run) == (len(expected_gone), True)
        assert (await store.stats(now=BASE)).envelopes == len(envs)
        real = await store.expire(ExpireRequest(cutoff, {B: b_cutoff, C: c_cutoff}), now=BASE + 6 * hour)
        assert (real.envelopes, real.dry_run) == (len(expected_gone), False)
        window = q(BASE, BASE + 6 * hour, bloom=FULL_BLOOM)
        assert (await store.query(window, now=BASE)).envelopes == ordered([e for e in envs if not doomed(e)])
        assert (
            await store.expire(ExpireRequest(cutoff, {B: b_cutoff, C: c_cutoff}), now=BASE)
        ).envelopes == 0

    @pytest.mark.parametrize("direction", [FWD, BWD])
    @pytest.mark.parametrize("kind", ["topics", "full-bloom"])
    async def test_packed_query_hides_what_expire_erased(
        self, store: ArchiveStore, direction: Direction, kind: str
    ) -> None:
        """Rows an expire left in a straddling bucket are hidden in the packed view as in the envelope view
        (Cassandra reads the lean columns only when no erasure covers the range; here one does)."""
        hour = 3600
        envs = [env(BASE + h * hour + i, t, i) for h in range(3) for i, t in enumerate([A, B, A, B])]
        await store.put(items(envs), now=BASE)
        cutoff = BASE + hour + 2  # inside the second bucket: two of its rows go, two stay
        await store.expire(ExpireRequest(cutoff), now=BASE)
        filters: dict[str, Any] = {"topics": [A, B]} if kind == "topics" else {"bloom": FULL_BLOOM}
        query = q(BASE, BASE + 3 * hour, limit=3, direction=direction, **filters)
        seen: list[bytes] = []
        while True:
            page = await store.query(query, now=BASE)
            packed = await store.query_packed(query, now=BASE)
            assert list(packed.hashes) == [e.hash for e in page.envelopes]
            assert list(packed.raws) == [e.raw for e in page.envelopes]
            assert packed.has_more == page.has_more
            seen += packed.hashes
            if not page.has_more:
                break
            query = dataclasses.replace(
                query, after=Position(page.envelopes[-1].sent, page.envelopes[-1].hash)
            )
        assert seen == [e.hash for e in ordered([e for e in envs if e.sent >= cutoff], direction)]

    async def test_expire_with_only_topic_cutoffs_leaves_other_topics(self, store: ArchiveStore) -> None:
        envs = [env(BASE + i, t, i) for i in range(10) for t in (A, B)]
        await store.put(items(envs), now=BASE)
        result = await store.expire(ExpireRequest(None, {A: BASE + 5}), now=BASE)
        assert result.envelopes == 5
        got = (await store.query(q(bloom=FULL_BLOOM), now=BASE)).envelopes
        assert got == ordered([e for e in envs if e.topic == B or e.sent >= BASE + 5])

    def _bucket(self, e: StoredEnvelope) -> int:
        return e.sent // self.BUCKET_SECONDS

    async def _spread(self, store: ArchiveStore) -> list[StoredEnvelope]:
        rng = random.Random(11)
        width = self.BUCKET_SECONDS
        envs = [
            env(BASE + rng.randrange(8 * width), rng.choice(TOPICS[:3]), n, size=rng.randrange(10, 900))
            for n in range(150)
        ]
        await store.put(items(envs), now=BASE)
        return envs

    async def test_list_buckets_sizes_add_up(self, store: ArchiveStore) -> None:
        envs = await self._spread(store)
        lo, hi = BASE // self.BUCKET_SECONDS - 2, BASE // self.BUCKET_SECONDS + 10
        buckets = [b async for b in store.list_buckets(TIME_TABLE, lo, hi)]
        assert sum(b.rows for b in buckets) == len(envs)
        expected: dict[int, list[StoredEnvelope]] = {}
        for e in envs:
            expected.setdefault(self._bucket(e), []).append(e)
        per_bucket: dict[int, int] = {}
        for b in buckets:
            assert b.table == TIME_TABLE and b.rows > 0 and b.size_bytes > 0
            per_bucket[b.bucket] = per_bucket.get(b.bucket, 0) + b.rows  # summed over shards
        assert per_bucket == {k: len(v) for k, v in expected.items()}
        if self.EXACT_BUCKET_SIZES:
            assert sum(b.size_bytes for b in buckets) == sum(len(e.raw) for e in envs)
        inner = sorted(expected)[2:5]
        sub = [b async for b in store.list_buckets(TIME_TABLE, inner[0], inner[-1])]
        assert {b.bucket for b in sub} == {k for k in expected if inner[0] <= k <= inner[-1]}
        by_topic = [
            b async for b in store.list_buckets(TOPIC_TABLE, (BASE - DAY) // DAY, (BASE + DAY) // DAY)
        ]
        assert sum(b.rows for b in by_topic) == len(envs)
        assert {b.topic for b in by_topic} == {e.topic for e in envs}
        assert {(b.bucket, b.topic) for b in by_topic} == {(e.sent // DAY, e.topic) for e in envs}

    async def test_delete_buckets_removes_exactly_those_buckets(self, store: ArchiveStore) -> None:
        envs = await self._spread(store)
        lo, hi = BASE // self.BUCKET_SECONDS - 1, BASE // self.BUCKET_SECONDS + 9
        buckets = [b async for b in store.list_buckets(TIME_TABLE, lo, hi)]
        victim = sorted({b.bucket for b in buckets})[3]
        doomed = [b for b in buckets if b.bucket == victim]
        assert await store.delete_buckets(doomed) == len(doomed)
        survivors = [e for e in envs if self._bucket(e) != victim]
        assert (await store.stats(now=BASE)).envelopes == len(survivors)
        window = q(BASE - self.BUCKET_SECONDS, BASE + 9 * self.BUCKET_SECONDS, bloom=FULL_BLOOM)
        assert flatten(await paginate(store, window)) == ordered(survivors)
        after = [b async for b in store.list_buckets(TIME_TABLE, lo, hi)]
        assert set(after) == {b for b in buckets if b.bucket != victim}

    async def test_shard_plan_round_trips(self, store: ArchiveStore) -> None:
        assert await store.get_shard_plan(TIME_TABLE) == []
        first = [ShardPlanEntry(TIME_TABLE, 472_224, 0, 4), ShardPlanEntry(TIME_TABLE, 472_222, 1, 8)]
        other = [ShardPlanEntry(TOPIC_TABLE, 19_675, 2, 2)]
        await store.put_shard_plan(first + other)
        assert await store.get_shard_plan(TIME_TABLE) == sorted(first, key=lambda e: e.bucket)
        await store.put_shard_plan([ShardPlanEntry(TIME_TABLE, 472_224, 1, 16)])
        assert await store.get_shard_plan(TIME_TABLE) == [
            first[1],
            ShardPlanEntry(TIME_TABLE, 472_224, 1, 16),
        ]
        assert await store.get_shard_plan(TOPIC_TABLE) == other

    # ------------------------------------------------------------------ against the model

    @settings(
        max_examples=MODEL_EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(data=st.data())
    async def test_random_workload_matches_the_model(self, store: ArchiveStore, data: st.DataObject) -> None:
        # Examples share the store (a fresh backend per example is too slow for Cassandra), so each example
        # lives in its own time window; every query stays inside it.
        base = BASE + next(_windows) * 10_000
        model = ModelStore(KEEP)
        spec = st.tuples(
            st.integers(0, 60), st.sampled_from(TOPICS), st.integers(0, 3), st.sampled_from([16, 300])
        )
        pool = [
            env(base + s, t, n, size=size)
            for s, t, n, size in data.draw(st.lists(spec, min_size=1, max_size=50))
        ]
        batches = data.draw(st.lists(st.lists(st.sampled_from(pool), max_size=20), min_size=1, max_size=6))
        for batch in batches:
            assert await store.put(items(batch), now=base) == await model.put(items(batch), now=base)
        for _ in range(data.draw(st.integers(1, 4))):
            lower = base + data.draw(st.integers(-5, 40))
            upper = lower + data.draw(st.integers(0, 70))
            chosen = data.draw(
                st.lists(st.sampled_from((*TOPICS, UNUSED)), min_size=1, max_size=4, unique=True)
            )
            kind = data.draw(st.sampled_from(["topics", "bloom", "full"]))
            query = Query(
                lower,
                upper,
                data.draw(st.integers(1, 9)),
                frozenset(chosen) if kind == "topics" else frozenset(),
                None if kind == "topics" else FULL_BLOOM if kind == "full" else topics_to_bloom(chosen),
                direction=data.draw(st.sampled_from([FWD, BWD])),
            )
            got, want = await paginate(store, query, now=base), await paginate(model, query, now=base)
            assert got == want
        probe = [e.hash for e in pool[:5]] + [b"\x99" * 32]
        assert await store.contains(probe, now=base) == await model.contains(probe, now=base)

    async def test_larger_random_workload_matches_the_model(self, store: ArchiveStore) -> None:
        rng = random.Random(2024)
        topics = [bytes([rng.randrange(256) for _ in range(4)]) for _ in range(40)]
        model = ModelStore(KEEP)
        envs = [
            env(BASE + rng.randrange(-300, 300), rng.choice(topics), rng.randrange(3)) for _ in range(700)
        ]
        for start in range(0, len(envs), 90):
            batch = envs[start : start + 90] + rng.sample(envs[: start + 1], min(10, start + 1))
            rng.shuffle(batch)
            assert await store.put(items(batch), now=BASE) == await model.put(items(batch), now=BASE)
        for i in range(24):
            chosen = rng.sample(topics, rng.choice([1, 3, 12, 30]))
            query = q(
                BASE - rng.randrange(320),
                BASE + rng.randrange(320),
                limit=rng.choice([4, 10, 50, 1000]),
                topics=chosen if i % 3 == 0 else (),
                bloom=None if i % 3 == 0 else topics_to_bloom(chosen) if i % 3 == 1 else FULL_BLOOM,
                direction=rng.choice([FWD, BWD]),
            )
            got, want = await paginate(store, query), await paginate(model, query)
            assert flatten(got) == flatten(want) and got == want
        assert (await store.stats(now=BASE)).envelopes == (await model.stats(now=BASE)).envelopes


_windows = itertools.count()
