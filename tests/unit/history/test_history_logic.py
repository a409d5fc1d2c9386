"""HistoryService over an in-memory archive: defaults, caps, bounds, filters, paging, batches, completion."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archivestore.types import Direction
from meshcore.errors import Unavailable
from services.history.bundling import batch_ends, max_list_body, rlp_list_size
from services.history.cursor import CursorAuthError, CursorCodec, CursorDirectionError, CursorLengthError
from services.history.logic import (
    ZERO_HASH,
    Batch,
    HistoryQuery,
    HistoryService,
    HistorySettings,
    InvalidQuery,
    PreparedQuery,
    QueryCompletion,
)
from tests.unit.history.history_fakes import (
    NOW,
    TOPIC_A,
    TOPIC_B,
    TOPIC_C,
    FakeArchive,
    FakeEnvelope,
    envelope,
    envelopes,
    ordered,
)
from wakucodec.bloom import topic_to_bloom, topics_to_bloom
from wakucodec.responses import bundle_envelopes

SECRET = b"k" * 32


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def service(archive: FakeArchive, *, clock: Clock | None = None, **knobs: Any) -> HistoryService:
    return HistoryService(archive, CursorCodec([SECRET]), HistorySettings(**knobs), clock=clock or Clock())


async def run(svc: HistoryService, query: HistoryQuery) -> tuple[list[Batch], QueryCompletion]:
    batches: list[Batch] = []
    completion: QueryCompletion | None = None
    async for item in svc.run(svc.prepare(query)):
        assert completion is None, "nothing may follow the completion"
        if isinstance(item, Batch):
            assert item.envelopes
            batches.append(item)
        else:
            completion = item
    assert completion is not None
    return batches, completion


def flat(batches: Sequence[Batch]) -> list[bytes]:
    return [raw for b in batches for raw in b.envelopes]


def raws(items: Sequence[FakeEnvelope]) -> list[bytes]:
    return [e.raw for e in items]


async def page_all(svc: HistoryService, query: HistoryQuery, max_pages: int = 1000) -> list[list[bytes]]:
    """Every page of ``query``, following cursors; asserts each completion is consistent."""
    pages: list[list[bytes]] = []
    cursor = b""
    for _ in range(max_pages):
        batches, done = await run(svc, replace(query, cursor=cursor))
        page = flat(batches)
        pages.append(page)
        assert done.delivered == len(page)
        if not done.next_cursor:
            return pages
        assert len(done.next_cursor) == 36
        cursor = done.next_cursor
    raise AssertionError("too many pages")


# ------------------------------------------------------------------------------------------ validation


def test_status_go_validation_messages() -> None:
    svc = service(FakeArchive())
    with pytest.raises(InvalidQuery, match=r"^query range is invalid: lower > upper$") as err:
        svc.prepare(HistoryQuery(lower=10, upper=9, topics=(TOPIC_A,)))
    assert err.value.reason == "INVALID_RANGE"
    with pytest.raises(InvalidQuery, match=r"^bloom filter and topics is empty$") as err:
        svc.prepare(HistoryQuery(lower=1, upper=9))
    assert err.value.reason == "EMPTY_FILTER"
    with pytest.raises(InvalidQuery, match="query range is invalid"):  # upper 0 = now + 60 < lower
        svc.prepare(HistoryQuery(lower=NOW + 61, upper=0, topics=(TOPIC_A,)))


@pytest.mark.parametrize(
    ("query", "text"),
    [
        (HistoryQuery(lower=1, upper=2, topics=(b"\x01\x02\x03",)), "topic must be 4 bytes"),
        (HistoryQuery(lower=1, upper=2, bloom=b"\x01" * 63), "bloom filter must be 64 bytes"),
        (HistoryQuery(lower=1, upper=2, topics=(TOPIC_A,) * 10_001), "too many topics"),
        (
            HistoryQuery(lower=1, upper=2, topics=(TOPIC_A,), max_batch_bytes=64 * 2**20 + 1),
            "max_batch_bytes",
        ),
    ],
)
def test_malformed_fields(query: HistoryQuery, text: str) -> None:
    with pytest.raises(InvalidQuery, match=text) as err:
        service(FakeArchive()).prepare(query)
    assert err.value.reason == "INVALID_FIELD"


def test_cursor_errors_surface_from_prepare() -> None:
    svc = service(FakeArchive())
    with pytest.raises(CursorLengthError):
        svc.prepare(HistoryQuery(lower=1, upper=2, topics=(TOPIC_A,), cursor=b"x" * 35))
    with pytest.raises(CursorAuthError):
        svc.prepare(HistoryQuery(lower=0, upper=2, topics=(TOPIC_A,), cursor=b"\x00" * 4 + b"x" * 32))


# -------------------------------------------------------------------------------------- defaults, caps


@pytest.mark.parametrize(
    ("limit", "knobs", "expected"),
    [
        (0, {}, 1000),
        (5000, {}, 1000),
        (1000, {}, 1000),
        (7, {}, 7),
        (0, {"default_limit": 10}, 10),
        (0, {"default_limit": 10, "max_limit": 50}, 10),
        (500, {"default_limit": 50, "max_limit": 50}, 50),
    ],
)
def test_limit_default_and_cap(limit: int, knobs: dict[str, Any], expected: int) -> None:
    prepared = service(FakeArchive(), **knobs).prepare(
        HistoryQuery(lower=1, upper=2, topics=(TOPIC_A,), limit=limit)
    )
    assert prepared.limit == expected


async def test_default_limit_delivers_1000_of_1500_with_a_cursor() -> None:
    archive = FakeArchive()
    archive.add(envelopes(range(NOW - 1500, NOW)))
    batches, done = await run(service(archive), HistoryQuery(lower=0, upper=0, topics=(TOPIC_A,)))
    assert done.delivered == 1000 == len(flat(batches))
    assert done.next_cursor


def test_upper_zero_is_now_plus_60_and_directions_default() -> None:
    prepared = service(FakeArchive()).prepare(HistoryQuery(lower=1, topics=(TOPIC_A,)))
    assert prepared.upper == NOW + 60
    assert prepared.direction is Direction.FORWARD
    backward = service(FakeArchive(), default_direction=Direction.BACKWARD)
    assert backward.prepare(HistoryQuery(lower=1, topics=(TOPIC_A,))).direction is Direction.BACKWARD
    explicit = HistoryQuery(lower=1, topics=(TOPIC_A,), direction=Direction.FORWARD)
    assert backward.prepare(explicit).direction is Direction.FORWARD


def test_batch_budget_default_and_ceiling() -> None:
    svc = service(FakeArchive(), max_batch_bytes=5000, batch_bytes_ceiling=8000)
    assert svc.prepare(HistoryQuery(lower=1, topics=(TOPIC_A,))).max_batch_bytes == 5000
    assert svc.prepare(HistoryQuery(lower=1, topics=(TOPIC_A,), max_batch_bytes=700)).max_batch_bytes == 700
    assert (
        svc.prepare(HistoryQuery(lower=1, topics=(TOPIC_A,), max_batch_bytes=2**26)).max_batch_bytes == 8000
    )


# ------------------------------------------------------------------------------------- filters, bounds


async def test_bounds_are_inclusive() -> None:
    archive = FakeArchive()
    archive.add(envelopes([99, 100, 150, 200, 201]))
    batches, done = await run(service(archive), HistoryQuery(lower=100, upper=200, topics=(TOPIC_A,)))
    assert [e.sent for e in archive.items if e.raw in flat(batches)] == [100, 150, 200]
    assert done.delivered == 3


async def test_upper_zero_includes_now_plus_60_but_not_61() -> None:
    archive = FakeArchive()
    archive.add(envelopes([NOW, NOW + 60, NOW + 61]))
    batches, _ = await run(service(archive), HistoryQuery(lower=NOW, topics=(TOPIC_A,)))
    assert flat(batches) == raws(archive.items[:2])


async def test_topics_override_bloom() -> None:
    archive = FakeArchive()
    a, b = envelopes([10, 11], TOPIC_A), envelopes([12, 13], TOPIC_B)
    archive.add(a + b)
    batches, _ = await run(
        service(archive), HistoryQuery(lower=1, upper=100, bloom=topic_to_bloom(TOPIC_A), topics=(TOPIC_B,))
    )
    assert flat(batches) == raws(b)
    assert archive.calls[0].bloom is None and archive.calls[0].topics == (TOPIC_B,)


async def test_bloom_query() -> None:
    archive = FakeArchive()
    a, b, c = envelopes([10], TOPIC_A), envelopes([11], TOPIC_B), envelopes([12], TOPIC_C)
    archive.add(a + b + c)
    bloom = topics_to_bloom([TOPIC_A, TOPIC_C])
    batches, _ = await run(service(archive), HistoryQuery(lower=1, upper=100, bloom=bloom))
    assert flat(batches) == raws(a + c)


# ---------------------------------------------------------------------------------------------- paging


@pytest.mark.parametrize("direction", list(Direction))
@pytest.mark.parametrize(("limit", "page"), [(6, 4), (7, 7), (10, 3), (1, 1)])
async def test_paging_by_cursor_has_no_duplicates_and_no_gaps(
    direction: Direction, limit: int, page: int
) -> None:
    archive = FakeArchive()
    # Several envelopes per second, so resuming inside one second is exercised.
    archive.add(envelopes([100 + i // 3 for i in range(40)]))
    archive.add(envelopes(range(100, 120), TOPIC_B))
    svc = service(archive, archive_page=page)
    pages = await page_all(
        svc, HistoryQuery(lower=100, upper=200, topics=(TOPIC_A,), limit=limit, direction=direction)
    )
    expected = raws(ordered([e for e in archive.items if e.topic == TOPIC_A], direction))
    assert [raw for p in pages for raw in p] == expected
    assert all(len(p) == limit for p in pages[:-1]) and 0 < len(pages[-1]) <= limit


async def test_status_go_pagination_vector() -> None:
    # protocol-notes §7.3: 10 envelopes at now-10 … now-1, limit 6 → 6 oldest and a cursor, then 4, none.
    archive = FakeArchive()
    archive.add(envelopes(range(NOW - 10, NOW)))
    svc = service(archive)
    first, done = await run(svc, HistoryQuery(lower=NOW - 10, upper=NOW, topics=(TOPIC_A,), limit=6))
    assert flat(first) == raws(ordered(archive.items)[:6])
    assert done.last_envelope_hash == ordered(archive.items)[5].hash
    assert done.next_cursor[:4] == (NOW - 5).to_bytes(4, "big")
    second, done = await run(
        svc, HistoryQuery(lower=NOW - 10, upper=NOW, topics=(TOPIC_A,), limit=6, cursor=done.next_cursor)
    )
    assert flat(second) == raws(ordered(archive.items)[6:])
    assert done.next_cursor == b"" and done.delivered == 4


async def test_upper_zero_second_page_is_accepted_later() -> None:
    """The cursor binds upper = 0, not now + 60: a page fetched 90 s later still continues the query."""
    clock = Clock()
    archive = FakeArchive()
    archive.add(envelopes(range(NOW - 10, NOW)))
    svc = service(archive, clock=clock)
    _, first = await run(svc, HistoryQuery(lower=NOW - 10, topics=(TOPIC_A,), limit=6))
    clock.now += 90
    later = envelope(NOW + 100)  # arrived meanwhile; inside the new now + 60
    archive.add([later])
    batches, done = await run(
        svc, HistoryQuery(lower=NOW - 10, topics=(TOPIC_A,), limit=6, cursor=first.next_cursor)
    )
    assert flat(batches) == raws(ordered(archive.items)[6:])
    assert flat(batches)[-1] == later.raw
    assert done.next_cursor == b""
    # The same cursor with the first page's resolved upper spelled out is another query.
    with pytest.raises(CursorAuthError):
        svc.prepare(HistoryQuery(lower=NOW - 10, upper=NOW + 60, topics=(TOPIC_A,), cursor=first.next_cursor))


async def test_cursor_continues_with_other_page_size_and_bloom_alongside_topics() -> None:
    archive = FakeArchive()
    archive.add(envelopes(range(10, 30)))
    svc = service(archive)
    _, done = await run(svc, HistoryQuery(lower=1, upper=100, topics=(TOPIC_A,), limit=5))
    batches, _ = await run(
        svc,
        HistoryQuery(
            lower=1,
            upper=100,
            topics=(TOPIC_A, TOPIC_A),
            bloom=b"\x01" * 64,
            limit=50,
            cursor=done.next_cursor,
        ),
    )
    assert flat(batches) == raws(archive.items[5:])


async def test_cursor_for_other_direction_is_refused() -> None:
    archive = FakeArchive()
    archive.add(envelopes(range(10, 30)))
    svc = service(archive)
    _, done = await run(svc, HistoryQuery(lower=1, upper=100, topics=(TOPIC_A,), limit=5))
    with pytest.raises(CursorDirectionError):
        svc.prepare(
            HistoryQuery(
                lower=1, upper=100, topics=(TOPIC_A,), cursor=done.next_cursor, direction=Direction.BACKWARD
            )
        )


async def test_cursor_resumes_after_a_16_byte_prefix() -> None:
    """The archive receives a 32-byte resume hash padded as archivestore.ordering.resume_key pads it."""
    archive = FakeArchive()
    archive.add(envelopes(range(10, 20)))
    for direction, fill in ((Direction.FORWARD, b"\xff"), (Direction.BACKWARD, b"\x00")):
        svc = service(archive)
        query = HistoryQuery(lower=1, upper=100, topics=(TOPIC_A,), limit=3, direction=direction)
        _, done = await run(svc, query)
        prepared = svc.prepare(replace(query, cursor=done.next_cursor))
        assert prepared.after is not None
        assert prepared.after.hash == done.last_envelope_hash[:16] + fill * 16


async def test_exact_limit_gives_no_cursor() -> None:
    archive = FakeArchive()
    archive.add(envelopes(range(10, 16)))
    _, done = await run(service(archive), HistoryQuery(lower=1, upper=100, topics=(TOPIC_A,), limit=6))
    assert done.delivered == 6 and done.next_cursor == b""
    assert done.last_envelope_hash == ordered(archive.items)[-1].hash


async def test_nothing_matched() -> None:
    archive = FakeArchive()
    archive.add(envelopes(range(10, 16), TOPIC_B))
    batches, done = await run(service(archive), HistoryQuery(lower=1, upper=100, topics=(TOPIC_A,)))
    assert batches == []
    assert done == QueryCompletion(b"", ZERO_HASH, 0)


# ----------------------------------------------------------------------------------- chunks, streaming


async def test_archive_page_first_then_the_rest_in_one_read() -> None:
    archive = FakeArchive()
    archive.add(envelopes(range(100, 150)))
    batches, done = await run(
        service(archive, archive_page=7), HistoryQuery(lower=1, upper=999, topics=(TOPIC_A,), limit=20)
    )
    assert [c.limit for c in archive.calls] == [7, 13]
    assert archive.calls[0].after is None
    assert archive.calls[1].after is not None and archive.calls[1].after.sent == 106
    assert done.delivered == 20 and done.next_cursor
    # A batch never spans two archive chunks.
    assert [len(b.envelopes) for b in batches] == [7, 13]


async def test_short_archive_reads_are_continued_until_the_limit() -> None:
    archive = FakeArchive(max_per_call=5)  # as when the archive's byte budget ends a page early
    archive.add(envelopes(range(100, 150)))
    batches, done = await run(
        service(archive, archive_page=7), HistoryQuery(lower=1, upper=999, topics=(TOPIC_A,), limit=20)
    )
    assert [c.limit for c in archive.calls] == [7, 15, 10, 5]
    assert flat(batches) == raws(ordered(archive.items)[:20])
    assert done.delivered == 20 and done.next_cursor


async def test_first_batch_leaves_before_the_next_chunk_is_read() -> None:
    archive = FakeArchive(gate=asyncio.Event(), gate_from=1)
    archive.add(envelopes(range(100, 150)))
    svc = service(archive, archive_page=10)
    stream = svc.run(svc.prepare(HistoryQuery(lower=1, upper=999, topics=(TOPIC_A,), limit=30)))
    first = await asyncio.wait_for(anext(stream), 1)
    assert isinstance(first, Batch) and len(first.envelopes) == 10
    await asyncio.sleep(0)
    assert len(archive.calls) == 2  # one chunk of read-ahead, waiting at the gate
    assert archive.gate is not None
    archive.gate.set()
    rest = [item async for item in stream]
    assert isinstance(rest[-1], QueryCompletion) and rest[-1].delivered == 30


async def test_closing_the_stream_cancels_the_read_ahead() -> None:
    archive = FakeArchive(gate=asyncio.Event(), gate_from=1)
    archive.add(envelopes(range(100, 150)))
    svc = service(archive, archive_page=10)
    stream = svc.run(svc.prepare(HistoryQuery(lower=1, upper=999, topics=(TOPIC_A,), limit=30)))
    await anext(stream)
    await stream.aclose()
    await asyncio.sleep(0)
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert all(t.done() for t in tasks)


async def test_archive_failure_after_some_batches_propagates() -> None:
    archive = FakeArchive(fail_from=1, error=Unavailable("archive down"))
    archive.add(envelopes(range(100, 150)))
    svc = service(archive, archive_page=10)
    got: list[Batch | QueryCompletion] = []
    with pytest.raises(Unavailable):
        async for item in svc.run(svc.prepare(HistoryQuery(lower=1, upper=999, topics=(TOPIC_A,), limit=30))):
            got.append(item)
    assert len(got) == 1 and isinstance(got[0], Batch)


# --------------------------------------------------------------------------------------------- batches


sizes = st.lists(st.integers(0, 3000), max_size=60)


@settings(max_examples=60, deadline=None)
@given(data_sizes=sizes, budget=st.integers(1, 20_000), per_batch=st.integers(0, 5), page=st.integers(1, 30))
async def test_batches_respect_the_byte_budget(
    data_sizes: list[int], budget: int, per_batch: int, page: int
) -> None:
    archive = FakeArchive()
    archive.add(envelope(100 + i, data=b"\x07" * n, nonce=i) for i, n in enumerate(data_sizes))
    svc = service(archive, archive_page=page)
    batches, done = await run(
        svc,
        HistoryQuery(
            lower=1, upper=999, topics=(TOPIC_A,), max_batch_bytes=budget, max_batch_envelopes=per_batch
        ),
    )
    assert flat(batches) == raws(ordered(archive.items))  # order kept, nothing lost or repeated
    assert done.delivered == len(data_sizes)
    for batch in batches:
        assert batch.size_bytes == rlp_list_size(sum(map(len, batch.envelopes)))
        assert batch.size_bytes <= budget or len(batch.envelopes) == 1
        assert sum(map(len, batch.envelopes)) < budget or len(batch.envelopes) == 1  # history.proto's wording
        if per_batch:
            assert len(batch.envelopes) <= per_batch


def split(items: list[bytes], ends: list[int]) -> list[list[bytes]]:
    return [items[start:end] for start, end in zip([0, *ends], ends, strict=False)]


@given(items=st.lists(st.binary(max_size=300), max_size=40), budget=st.integers(0, 2000), batch=st.booleans())
def test_batch_ends_match_wakucodec_bundle_envelopes(items: list[bytes], budget: int, batch: bool) -> None:
    ends = batch_ends([len(i) for i in items], budget, 0 if batch else 1)
    assert split(items, ends) == list(bundle_envelopes(items, budget, batch=batch))


@given(budget=st.integers(0, 2**40))
def test_max_list_body_is_the_largest_body_that_fits(budget: int) -> None:
    body = max_list_body(budget)
    assert body == -1 or rlp_list_size(body) <= budget
    assert rlp_list_size(body + 1) > budget


@pytest.mark.parametrize(
    ("budget", "body"), [(0, -1), (1, 0), (56, 55), (57, 55), (58, 56), (258, 255), (259, 256)]
)
def test_max_list_body_around_the_header_steps(budget: int, body: int) -> None:
    assert max_list_body(budget) == body


def test_envelope_larger_than_the_budget_goes_alone() -> None:
    assert batch_ends([10, 500, 10], 100) == [1, 2, 3]
    assert batch_ends([10, 10, 10], 100, max_envelopes=2) == [2, 3]
    assert batch_ends([], 100) == []


# ---------------------------------------------------------------------------------------------- lookup


async def test_lookup_orders_dedupes_and_checks() -> None:
    archive = FakeArchive()
    stored = envelopes(range(3))
    archive.add(stored)
    svc = service(archive)
    missing = b"\x09" * 32
    result = await svc.lookup([stored[2].hash, missing, stored[0].hash, stored[2].hash], [])
    assert result.envelope_hashes == [stored[2].hash, stored[0].hash]
    assert archive.contains_calls[0][0] == [stored[2].hash, missing, stored[0].hash]
    with pytest.raises(InvalidQuery, match="too many hashes"):
        await svc.lookup([missing] * 600, [missing] * 401)
    with pytest.raises(InvalidQuery, match="32 bytes"):
        await svc.lookup([], [b"short"])
    assert (await svc.lookup([], [])).envelope_hashes == []


def test_prepared_query_flags() -> None:
    svc = service(FakeArchive())
    prepared: PreparedQuery = svc.prepare(HistoryQuery(lower=1, upper=5, bloom=b"\xff" * 64))
    assert not prepared.by_topics and not prepared.resumed and prepared.bloom == b"\xff" * 64
