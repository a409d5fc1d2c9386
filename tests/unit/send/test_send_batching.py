"""Group commit: a lone write is flushed at once, writes arriving during a flush share the next one, and
every caller gets its own outcome only after the flush holding its item returned."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.send.batching import GroupCommit


class Gated:
    """A flush that records its batches and waits for the test to let each one finish."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self, items: Sequence[int]) -> list[int | BaseException]:
        self.batches.append(list(items))
        await self.gate.wait()
        self.gate.clear()
        if self.fail is not None:
            raise self.fail
        return [ValueError(i) if i < 0 else i * 10 for i in items]


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_writes_arriving_during_a_flush_share_the_next_one() -> None:
    flush = Gated()
    batcher: GroupCommit[int, int] = GroupCommit(flush)
    first = asyncio.create_task(batcher.submit(1))
    await _settle()
    assert flush.batches == [[1]]  # a lone write does not wait for company
    later = [asyncio.create_task(batcher.submit(i)) for i in (2, 3, 4)]
    await _settle()
    assert not first.done() and flush.batches == [[1]]  # answered only once its flush returned
    flush.gate.set()
    assert await first == 10
    await _settle()
    assert flush.batches == [[1], [2, 3, 4]]
    flush.gate.set()
    assert await asyncio.gather(*later) == [20, 30, 40]
    assert (batcher.flushes, batcher.items) == (2, 4)


async def test_each_caller_gets_its_own_outcome_and_a_failed_flush_fails_only_its_callers() -> None:
    flush = Gated()
    batcher: GroupCommit[int, int] = GroupCommit(flush, max_batch=2)
    flush.gate.set()
    outcomes = await batcher.submit_all([5, -1])
    assert outcomes[0] == 50 and isinstance(outcomes[1], ValueError)
    flush.fail = RuntimeError("store down")
    failing = asyncio.create_task(batcher.submit(6))
    await _settle()
    flush.gate.set()
    with pytest.raises(RuntimeError, match="store down"):
        await failing
    flush.fail = None
    flush.gate.set()
    assert await batcher.submit(7) == 70


async def test_a_cancelled_caller_does_not_disturb_the_others_in_its_flush() -> None:
    flush = Gated()
    batcher: GroupCommit[int, int] = GroupCommit(flush)
    blocker = asyncio.create_task(batcher.submit(1))
    await _settle()
    gone, stays = asyncio.create_task(batcher.submit(2)), asyncio.create_task(batcher.submit(3))
    await _settle()
    gone.cancel()
    flush.gate.set()
    await blocker
    await _settle()
    flush.gate.set()
    assert await stays == 30
    assert flush.batches[-1] == [2, 3]  # the cancelled caller's item was flushed all the same
    assert gone.cancelled()


async def test_a_size_limit_splits_batches_but_an_oversized_item_still_goes_alone() -> None:
    flush = Gated()
    batcher: GroupCommit[int, int] = GroupCommit(flush, size=lambda i: i, max_size=10)
    flush.gate.set()
    blocker = asyncio.create_task(batcher.submit(1))
    await _settle()
    rest = [asyncio.create_task(batcher.submit(i)) for i in (4, 5, 2, 30, 3)]
    for _ in range(4):
        await _settle()
        flush.gate.set()
    await asyncio.gather(blocker, *rest)
    assert flush.batches == [[1], [4, 5], [2], [30], [3]]
