"""The write batcher: ack after durable, size/time triggers, back-pressure, failure isolation, de-duplication.

The sink is a test double whose writes block until the test releases them, so every ordering is forced with
events and futures. ``barrier()`` lets every task that is ready run its next step (asyncio's ready queue is
FIFO), which is how a test knows a caller has reached its wait; nothing waits on the clock to synchronise.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest

from meshcore.errors import Internal, Unavailable
from services.ingest.batcher import Batcher, Item, Outcome, Result, SeenCache
from services.ingest.model import ShuttingDown

WAIT = 5.0  # bound on every wait; a healthy run needs milliseconds


async def barrier() -> None:
    """Return once every task that was ready before the call has run its next step."""
    done = asyncio.Event()
    asyncio.get_running_loop().call_soon(done.set)
    await done.wait()


@dataclass(eq=False)
class Write:
    """One sink call, held open until the test releases it."""

    keys: list[bytes]
    release: asyncio.Event = field(default_factory=asyncio.Event)
    error: Exception | None = None

    def finish(self, error: Exception | None = None) -> None:
        self.error = error
        self.release.set()


class GatedSink:
    """Records writes; each blocks until released (or returns at once when ``auto``)."""

    def __init__(self, *, auto: bool = False) -> None:
        self.auto = auto
        self.writes: list[Write] = []
        self._new: asyncio.Queue[Write] = asyncio.Queue()
        self.in_flight = 0
        self.max_in_flight = 0
        self.stored: set[bytes] = set()
        self.invalid: set[bytes] = set()

    async def __call__(self, payloads: Sequence[bytes]) -> list[Result]:
        write = Write(list(payloads))
        self.writes.append(write)
        self._new.put_nowait(write)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if not self.auto:
                await write.release.wait()
            if write.error is not None:
                raise write.error
            results = []
            for key in write.keys:
                if key in self.invalid:
                    results.append(Result(Outcome.INVALID, "refused"))
                elif key in self.stored:
                    results.append(Result(Outcome.DUPLICATE))
                else:
                    self.stored.add(key)
                    results.append(Result(Outcome.INSERTED))
            return results
        finally:
            self.in_flight -= 1

    async def next_write(self) -> Write:
        return await asyncio.wait_for(self._new.get(), WAIT)

    def written(self) -> list[bytes]:
        return [k for w in self.writes for k in w.keys]


def item(key: str | bytes, size: int = 10) -> Item[bytes]:
    raw = key.encode() if isinstance(key, str) else key
    return Item(raw, size, raw)


def make(sink: GatedSink, **overrides: float) -> Batcher[bytes]:
    options: dict[str, float] = {
        "max_items": 3,
        "max_bytes": 10_000,
        "max_delay_s": 60.0,  # only the size trigger fires unless a test lowers it
        "max_pending_items": 100,
        "max_pending_bytes": 100_000,
        "max_inflight": 1,
        "seen_cache_size": 100,
    }
    options.update(overrides)
    return Batcher(
        sink,
        max_items=int(options["max_items"]),
        max_bytes=int(options["max_bytes"]),
        max_delay_s=options["max_delay_s"],
        max_pending_items=int(options["max_pending_items"]),
        max_pending_bytes=int(options["max_pending_bytes"]),
        max_inflight=int(options["max_inflight"]),
        seen_cache_size=int(options["seen_cache_size"]),
    )


@pytest.fixture
async def sink() -> GatedSink:
    return GatedSink()


@pytest.fixture
async def running(sink: GatedSink) -> AsyncIterator[Batcher[bytes]]:
    batcher = make(sink)
    batcher.start()
    yield batcher
    sink.auto = True  # writes the test did not release, and what close() flushes, complete at once
    for write in sink.writes:
        write.release.set()
    await asyncio.wait_for(batcher.close(), WAIT)


def submit(batcher: Batcher[bytes], *keys: str) -> asyncio.Task[list[Result]]:
    return asyncio.get_running_loop().create_task(batcher.submit([item(k) for k in keys]))


# ------------------------------------------------------------------------------------------ ack after durable


async def test_callers_are_acked_only_after_their_write_returns(
    running: Batcher[bytes], sink: GatedSink
) -> None:
    first, second = submit(running, "a", "b"), submit(running, "c")
    write = await sink.next_write()  # size trigger: 3 items from two callers coalesced into one write
    assert write.keys == [b"a", b"b", b"c"]
    await barrier()
    assert not first.done() and not second.done()  # the write has not returned: nothing is acknowledged
    write.finish()
    assert await asyncio.wait_for(first, WAIT) == [Result(Outcome.INSERTED)] * 2
    assert await asyncio.wait_for(second, WAIT) == [Result(Outcome.INSERTED)]


async def test_every_caller_is_acked_exactly_once_under_concurrency() -> None:
    sink = GatedSink(auto=True)
    batcher = make(sink, max_items=7, max_delay_s=0.001, max_inflight=3, max_pending_items=20)
    batcher.start()
    callers = [submit(batcher, *(f"k{c}-{i}" for i in range(c % 5 + 1))) for c in range(60)]
    results = await asyncio.wait_for(asyncio.gather(*callers), WAIT)
    for c, result in enumerate(results):
        assert result == [Result(Outcome.INSERTED)] * (c % 5 + 1)
    written = sink.written()
    assert len(written) == len(set(written)) == sum(c % 5 + 1 for c in range(60))
    assert all(len(w.keys) <= 7 for w in sink.writes)
    assert sink.max_in_flight <= 3
    await batcher.close()
    assert batcher.pending_items == 0


# ------------------------------------------------------------------------------------------ triggers


async def test_size_trigger_writes_a_full_batch_without_waiting_for_the_delay(
    running: Batcher[bytes], sink: GatedSink
) -> None:
    start = time.monotonic()
    submit(running, "a", "b", "c", "d")
    write = await sink.next_write()
    assert write.keys == [b"a", b"b", b"c"]
    assert time.monotonic() - start < 30  # the 60 s delay never came into play


async def test_byte_trigger_and_byte_bound_per_write() -> None:
    sink = GatedSink()
    batcher = make(sink, max_items=100, max_bytes=25)
    batcher.start()
    task = asyncio.ensure_future(batcher.submit([item(k, size=10) for k in ("a", "b", "c")]))
    write = await sink.next_write()
    assert write.keys == [b"a", b"b"]  # a third 10-byte item would exceed 25 bytes
    write.finish()
    closing = asyncio.ensure_future(batcher.close())  # "c" alone is below the byte trigger: close flushes it
    second = await sink.next_write()
    assert second.keys == [b"c"]
    second.finish()
    await asyncio.wait_for(task, WAIT)
    await asyncio.wait_for(closing, WAIT)


async def test_time_trigger_flushes_a_partial_batch_after_the_delay() -> None:
    sink = GatedSink(auto=True)
    batcher = make(sink, max_items=100, max_delay_s=0.05)
    batcher.start()
    start = time.monotonic()
    result = await asyncio.wait_for(batcher.submit([item("lonely")]), WAIT)
    assert result == [Result(Outcome.INSERTED)]
    assert sink.writes[0].keys == [b"lonely"]
    assert time.monotonic() - start >= 0.05
    await batcher.close()


async def test_an_item_larger_than_the_write_bound_is_written_alone() -> None:
    sink = GatedSink(auto=True)
    batcher = make(sink, max_bytes=100, max_pending_bytes=100, max_delay_s=0)
    batcher.start()
    result = await asyncio.wait_for(batcher.submit([item("huge", size=1000), item("small")]), WAIT)
    assert result == [Result(Outcome.INSERTED)] * 2
    assert [w.keys for w in sink.writes] == [[b"huge"], [b"small"]]
    await batcher.close()


# ------------------------------------------------------------------------------------------ back-pressure


async def test_back_pressure_blocks_at_the_bound_and_resumes_in_order() -> None:
    sink = GatedSink()
    batcher = make(sink, max_items=2, max_pending_items=4)
    batcher.start()
    first = submit(batcher, "a", "b", "c", "d")  # fills the bound: 4 pending
    write = await sink.next_write()
    assert write.keys == [b"a", b"b"]
    blocked = submit(batcher, "e")
    later = submit(batcher, "f")
    await barrier()
    assert batcher.pending_items == 4
    assert batcher.waiting_callers == 2  # both wait for room, nothing more was queued
    assert not blocked.done() and not later.done()
    write.finish()  # two slots free up: e then f get them, in arrival order
    second = await sink.next_write()
    assert second.keys == [b"c", b"d"]
    await barrier()
    assert batcher.waiting_callers == 0
    assert batcher.pending_items == 4
    second.finish()
    third = await sink.next_write()
    assert third.keys == [b"e", b"f"]
    third.finish()
    assert list(await asyncio.wait_for(asyncio.gather(first, blocked, later), WAIT)) == [
        [Result(Outcome.INSERTED)] * 4,
        [Result(Outcome.INSERTED)],
        [Result(Outcome.INSERTED)],
    ]
    await batcher.close()


async def test_a_batch_larger_than_the_bound_gets_through_piecewise() -> None:
    sink = GatedSink(auto=True)
    batcher = make(sink, max_items=2, max_pending_items=2, max_delay_s=0.0)
    batcher.start()
    keys = [f"k{i}" for i in range(9)]
    result = await asyncio.wait_for(batcher.submit([item(k) for k in keys]), WAIT)
    assert result == [Result(Outcome.INSERTED)] * 9
    assert sink.written() == [k.encode() for k in keys]
    await batcher.close()


async def test_byte_bound_blocks_too(sink: GatedSink) -> None:
    batcher = make(sink, max_items=1, max_pending_bytes=25)
    batcher.start()
    first = asyncio.ensure_future(batcher.submit([item("a", 10), item("b", 10)]))
    write = await sink.next_write()
    blocked = asyncio.ensure_future(batcher.submit([item("c", 10)]))
    await barrier()
    assert batcher.pending_bytes == 20 and batcher.waiting_callers == 1
    write.finish()
    (await sink.next_write()).finish()
    (await sink.next_write()).finish()
    await asyncio.wait_for(asyncio.gather(first, blocked), WAIT)
    await batcher.close()


async def test_a_cancelled_waiter_gives_its_place_up(sink: GatedSink) -> None:
    batcher = make(sink, max_items=1, max_pending_items=1)
    batcher.start()
    first = submit(batcher, "a")
    write = await sink.next_write()
    quitter, patient = submit(batcher, "b"), submit(batcher, "c")
    await barrier()
    assert batcher.waiting_callers == 2
    quitter.cancel()
    await asyncio.wait({quitter}, timeout=WAIT)
    write.finish()
    (await sink.next_write()).finish()
    assert await asyncio.wait_for(patient, WAIT) == [Result(Outcome.INSERTED)]
    await asyncio.wait_for(first, WAIT)
    assert sink.written() == [b"a", b"c"]
    assert batcher.pending_items == 0
    await batcher.close()


# ------------------------------------------------------------------------------------------ failures


async def test_a_failed_write_fails_exactly_its_callers(sink: GatedSink) -> None:
    batcher = make(sink, max_items=2, max_inflight=2)
    batcher.start()
    doomed_1, doomed_2 = submit(batcher, "a"), submit(batcher, "b")
    w1 = await sink.next_write()
    fine = submit(batcher, "c", "d")
    w2 = await sink.next_write()
    assert (w1.keys, w2.keys) == ([b"a", b"b"], [b"c", b"d"])
    w1.finish(Unavailable("archive down"))
    for task in (doomed_1, doomed_2):
        with pytest.raises(Unavailable, match="archive down"):
            await asyncio.wait_for(task, WAIT)
    await barrier()
    assert not fine.done()
    w2.finish()
    assert await asyncio.wait_for(fine, WAIT) == [Result(Outcome.INSERTED)] * 2
    # The batcher keeps working, and a failed key is not remembered as written.
    retry = submit(batcher, "a", "b")
    w3 = await sink.next_write()
    assert w3.keys == [b"a", b"b"]
    w3.finish()
    assert await asyncio.wait_for(retry, WAIT) == [Result(Outcome.INSERTED)] * 2
    await batcher.close()


async def test_a_caller_spanning_two_writes_fails_if_either_fails(sink: GatedSink) -> None:
    batcher = make(sink, max_items=2, max_inflight=2)
    batcher.start()
    spanning = submit(batcher, "a", "b", "c", "d")
    w1, w2 = await sink.next_write(), await sink.next_write()
    w1.finish()
    w2.finish(Unavailable("second write lost"))
    with pytest.raises(Unavailable, match="second write lost"):
        await asyncio.wait_for(spanning, WAIT)
    await batcher.close()


async def test_sink_answering_the_wrong_count_is_an_internal_error() -> None:
    async def short_sink(payloads: Sequence[bytes]) -> list[Result]:
        return []

    batcher: Batcher[bytes] = Batcher(
        short_sink, max_items=2, max_bytes=100, max_delay_s=0, max_pending_items=10, max_pending_bytes=100
    )
    batcher.start()
    with pytest.raises(Internal, match="wrong number of results"):
        await asyncio.wait_for(batcher.submit([item("a")]), WAIT)
    await batcher.close()


# ------------------------------------------------------------------------------------------ duplicates


async def test_duplicates_in_the_window_share_one_write(running: Batcher[bytes], sink: GatedSink) -> None:
    first = submit(running, "a", "b")
    again = submit(running, "b", "c")  # "b" is queued: it joins that entry
    same_batch = submit(running, "d", "d", "e", "f")
    write = await sink.next_write()
    assert write.keys == [b"a", b"b", b"c"]
    write.finish()
    second = await sink.next_write()
    assert second.keys == [b"d", b"e", b"f"]
    second.finish()
    cached, inserted = Result(Outcome.CACHED), Result(Outcome.INSERTED)
    assert await asyncio.wait_for(first, WAIT) == [inserted, inserted]
    assert await asyncio.wait_for(again, WAIT) == [cached, inserted]
    assert await asyncio.wait_for(same_batch, WAIT) == [inserted, cached, inserted, inserted]


async def test_acknowledged_keys_are_answered_from_the_seen_cache(
    running: Batcher[bytes], sink: GatedSink
) -> None:
    first = submit(running, "a", "b", "c")
    (await sink.next_write()).finish()
    await asyncio.wait_for(first, WAIT)
    # No write at all: the result is immediate.
    assert (
        await asyncio.wait_for(running.submit([item("c"), item("a")]), WAIT) == [Result(Outcome.CACHED)] * 2
    )
    assert len(sink.writes) == 1


async def test_a_joined_duplicate_shares_the_failure(running: Batcher[bytes], sink: GatedSink) -> None:
    first = submit(running, "a")
    joined = submit(running, "a")
    submit(running, "x", "y")
    (await sink.next_write()).finish(Unavailable("gone"))
    for task in (first, joined):
        with pytest.raises(Unavailable):
            await asyncio.wait_for(task, WAIT)
    assert b"a" not in running.seen._keys


async def test_invalid_items_are_not_cached(sink: GatedSink) -> None:
    sink.auto = True
    sink.invalid.add(b"bad")
    batcher = make(sink, max_delay_s=0)
    batcher.start()
    assert await batcher.submit([item("bad")]) == [Result(Outcome.INVALID, "refused")]
    assert await batcher.submit([item("bad")]) == [Result(Outcome.INVALID, "refused")]
    assert len(sink.writes) == 2
    await batcher.close()


async def test_archive_duplicates_are_reported_and_then_cached() -> None:
    sink = GatedSink(auto=True)
    sink.stored.add(b"old")
    batcher = make(sink, max_delay_s=0)
    batcher.start()
    assert await batcher.submit([item("old")]) == [Result(Outcome.DUPLICATE)]
    assert await batcher.submit([item("old")]) == [Result(Outcome.CACHED)]
    assert len(sink.writes) == 1
    await batcher.close()


def test_seen_cache_is_a_bounded_lru() -> None:
    cache = SeenCache(2)
    cache.add(b"a")
    cache.add(b"b")
    assert cache.hit(b"a")  # a is now the most recent
    cache.add(b"c")  # evicts b
    assert cache.hit(b"a") and cache.hit(b"c") and not cache.hit(b"b")
    assert len(cache) == 2
    off = SeenCache(0)
    off.add(b"a")
    assert not off.hit(b"a")


async def test_an_evicted_key_is_written_again_and_reported_as_archive_duplicate() -> None:
    sink = GatedSink(auto=True)
    batcher = make(sink, max_delay_s=0, seen_cache_size=1)
    batcher.start()
    await batcher.submit([item("a")])
    await batcher.submit([item("b")])  # evicts a
    assert await batcher.submit([item("a")]) == [Result(Outcome.DUPLICATE)]
    assert sink.written() == [b"a", b"b", b"a"]
    await batcher.close()


# ---------------------------------------------------------------------------------- shutdown, cancellation


async def test_close_flushes_queued_items_without_waiting_for_the_delay(sink: GatedSink) -> None:
    sink.auto = True
    batcher = make(sink, max_items=100, max_delay_s=3600)
    batcher.start()
    task = submit(batcher, "a", "b")
    await barrier()
    assert not sink.writes
    await asyncio.wait_for(batcher.close(), WAIT)
    assert await asyncio.wait_for(task, WAIT) == [Result(Outcome.INSERTED)] * 2
    with pytest.raises(ShuttingDown):
        await batcher.submit([item("late")])


async def test_close_fails_callers_waiting_for_room(sink: GatedSink) -> None:
    batcher = make(sink, max_items=1, max_pending_items=1)
    batcher.start()
    first = submit(batcher, "a")
    write = await sink.next_write()
    waiting = submit(batcher, "b")
    await barrier()
    closing = asyncio.ensure_future(batcher.close())
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(waiting, WAIT)
    write.finish()
    await asyncio.wait_for(closing, WAIT)
    assert await first == [Result(Outcome.INSERTED)]


async def test_a_cancelled_caller_leaves_its_items_to_be_written(sink: GatedSink) -> None:
    batcher = make(sink, max_items=2)
    batcher.start()
    gone = submit(batcher, "a", "b")
    write = await sink.next_write()
    gone.cancel()
    await asyncio.wait({gone}, timeout=WAIT)
    write.finish(Unavailable("nobody listens"))  # the failure is retrieved: no "never retrieved" noise
    await barrier()
    assert batcher.pending_items == 0
    await batcher.close()


# ------------------------------------------------------------------------------------------ randomized


@pytest.mark.parametrize("seed", range(5))
async def test_randomized_callers_failures_and_duplicates(seed: int) -> None:
    rng = random.Random(seed)
    failing: set[int] = set(rng.sample(range(40), 8))
    calls = 0
    stored: set[bytes] = set()
    written_ok: list[bytes] = []

    async def flaky(payloads: Sequence[bytes]) -> list[Result]:
        nonlocal calls
        index, calls = calls, calls + 1
        await asyncio.sleep(0)  # a yield, so writes overlap
        if index in failing:
            raise Unavailable(f"write {index} failed")
        results = []
        for key in payloads:
            results.append(Result(Outcome.DUPLICATE if key in stored else Outcome.INSERTED))
            stored.add(key)
            written_ok.append(key)
        return results

    batcher: Batcher[bytes] = Batcher(
        flaky,
        max_items=rng.randint(1, 6),
        max_bytes=10_000,
        max_delay_s=0.0,
        max_pending_items=rng.randint(6, 12),
        max_pending_bytes=10_000,
        max_inflight=rng.randint(1, 3),
        seen_cache_size=rng.choice([0, 5, 1000]),
    )
    batcher.start()
    universe = [f"k{i}".encode() for i in range(30)]
    requests = [[rng.choice(universe) for _ in range(rng.randint(1, 5))] for _ in range(40)]
    outcomes = await asyncio.wait_for(
        asyncio.gather(
            *(batcher.submit([Item(k, 1, k) for k in r]) for r in requests), return_exceptions=True
        ),
        WAIT,
    )
    for keys, outcome in zip(requests, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, Unavailable)
            continue
        assert len(outcome) == len(keys)
        for key, result in zip(keys, outcome, strict=True):
            assert result.outcome in (Outcome.INSERTED, Outcome.DUPLICATE, Outcome.CACHED)
            assert key in stored  # acknowledged => the sink holds it
    await batcher.close()
    assert batcher.pending_items == 0 and batcher.pending_bytes == 0
    # No key was ever in two overlapping writes: within one write keys are distinct.
    assert len(written_ok) >= len(stored)
