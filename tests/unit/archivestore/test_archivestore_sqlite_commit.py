"""Group commit: concurrent put batches share transactions, keep their own outcomes, and fail together."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from archivestore.errors import StoreUnavailable
from archivestore.sqlite.group_commit import GroupCommit
from archivestore.sqlite.operations import InsertRow


def row(n: int) -> InsertRow:
    return (n, n.to_bytes(32, "big"), b"\x00\x00\x00\x01", n + 10, None, None, b"\xc0")


class Writer:
    """A fake transaction runner: records each transaction's rows; waits on ``gate`` when one is set."""

    def __init__(self) -> None:
        self.transactions: list[list[int]] = []
        self.gate: asyncio.Event | None = None
        self.seen: set[bytes] = set()
        self.fail: Exception | None = None  # raised by the next transaction only
        self.started = asyncio.Event()

    async def __call__(self, rows: Sequence[InsertRow]) -> list[bool]:
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        self.transactions.append([r[0] for r in rows])
        if self.fail is not None:
            err, self.fail = self.fail, None
            raise err
        out = []
        for r in rows:  # INSERT … ON CONFLICT DO NOTHING: new once, then duplicate
            out.append(r[1] not in self.seen)
            self.seen.add(r[1])
        return out


async def test_a_lone_batch_is_written_at_once_in_its_own_transaction() -> None:
    writer = Writer()
    commits = GroupCommit(writer)
    assert await commits.insert([row(1), row(2)]) == [True, True]
    assert writer.transactions == [[1, 2]]


async def test_batches_waiting_for_the_writer_share_the_next_transaction() -> None:
    writer = Writer()
    writer.gate = asyncio.Event()
    commits = GroupCommit(writer)
    first = asyncio.create_task(commits.insert([row(1)]))
    await writer.started.wait()  # the first transaction is running, held at the gate
    waiting = [asyncio.create_task(commits.insert([row(n), row(n + 100)])) for n in (2, 3, 4)]
    await asyncio.sleep(0)
    writer.gate.set()
    assert await first == [True]
    assert [await w for w in waiting] == [[True, True]] * 3
    assert writer.transactions == [[1], [2, 102, 3, 103, 4, 104]]
    assert (commits.transactions, commits.batches) == (2, 4)


async def test_each_caller_gets_its_own_outcomes_and_a_shared_envelope_is_new_once() -> None:
    writer = Writer()
    writer.gate = asyncio.Event()
    commits = GroupCommit(writer)
    first = asyncio.create_task(commits.insert([row(9)]))
    await writer.started.wait()
    a = asyncio.create_task(commits.insert([row(1), row(2)]))
    b = asyncio.create_task(commits.insert([row(2), row(3), row(9)]))
    await asyncio.sleep(0)
    writer.gate.set()
    assert await first == [True]
    assert await a == [True, True]
    assert await b == [False, True, False]


async def test_groups_are_split_at_max_rows_without_splitting_a_batch() -> None:
    writer = Writer()
    writer.gate = asyncio.Event()
    commits = GroupCommit(writer, max_rows=3)
    tasks = [asyncio.create_task(commits.insert([row(10 * n + i) for i in range(2)])) for n in range(4)]
    await asyncio.sleep(0)
    writer.gate.set()
    await asyncio.gather(*tasks)
    assert writer.transactions == [[0, 1], [10, 11], [20, 21], [30, 31]]
    big = await commits.insert([row(100 + i) for i in range(5)])  # larger than max_rows: alone, whole
    assert big == [True] * 5 and writer.transactions[-1] == [100, 101, 102, 103, 104]


async def test_a_failed_transaction_fails_every_batch_in_it_and_the_next_group_still_runs() -> None:
    writer = Writer()
    writer.gate = asyncio.Event()
    commits = GroupCommit(writer, max_rows=2)
    writer.fail = StoreUnavailable("disk full")
    failing = [asyncio.create_task(commits.insert([row(n)])) for n in (1, 2)]
    later = asyncio.create_task(commits.insert([row(3)]))
    await asyncio.sleep(0)
    writer.gate.set()
    for task in failing:
        with pytest.raises(StoreUnavailable, match="disk full"):
            await task
    assert await later == [True]
    assert writer.transactions == [[1, 2], [3]]


async def test_a_cancelled_caller_does_not_cancel_the_shared_transaction() -> None:
    writer = Writer()
    writer.gate = asyncio.Event()
    commits = GroupCommit(writer)
    first = asyncio.create_task(commits.insert([row(1)]))
    other = asyncio.create_task(commits.insert([row(2)]))
    await asyncio.sleep(0)
    first.cancel()
    writer.gate.set()
    assert await other == [True]
    with pytest.raises(asyncio.CancelledError):
        await first
    assert writer.transactions == [[1, 2]]  # written anyway, as a put whose caller went away always was
