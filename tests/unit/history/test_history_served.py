"""The served-envelope feed behind WatchServed: numbering, resume within the ring, a new epoch or an evicted
point replays what the ring holds (not resumed), slow watchers are ended, shutdown ends every watch."""

from __future__ import annotations

import asyncio

import pytest

from meshcore.errors import ResourceExhausted, Unavailable
from services.history.served import ServedFeed


def hashes(*tags: int) -> bytes:
    return b"".join(bytes([t]) * 32 for t in tags)


async def test_chunks_are_numbered_and_a_watch_resumes_exactly_while_the_ring_holds_them() -> None:
    feed = ServedFeed(ring_hashes=4, epoch="e")
    for tag in (1, 2, 3):
        feed.publish(hashes(tag))
    feed.publish(b"")  # nothing served: no chunk
    assert feed.sequence == 3
    watch = feed.watch("e", 1)
    assert watch.resumed and await watch.next() == [(2, hashes(2)), (3, hashes(3))]
    feed.publish(hashes(4, 5))
    assert await watch.next() == [(4, hashes(4, 5))]
    live = feed.watch()  # no resume point: live only
    assert not live.resumed
    feed.publish(hashes(6))
    assert await live.next() == [(5, hashes(6))]


async def test_an_evicted_point_or_another_epoch_replays_the_ring_not_resumed() -> None:
    feed = ServedFeed(ring_hashes=3, epoch="e")
    for tag in range(1, 6):
        feed.publish(hashes(tag))  # the ring keeps the last three hashes: chunks 3, 4, 5
    evicted = feed.watch("e", 1)
    assert not evicted.resumed and [s for s, _ in await evicted.next()] == [3, 4, 5]
    held = feed.watch("e", 2)  # chunk 3 is the oldest held: after 2 is still exact
    assert held.resumed and [s for s, _ in await held.next()] == [3, 4, 5]
    other = feed.watch("another-process", 4)
    assert not other.resumed and [s for s, _ in await other.next()] == [3, 4, 5]


async def test_a_slow_watcher_is_ended_and_shutdown_ends_the_others() -> None:
    feed = ServedFeed(ring_hashes=100, max_queued_chunks=2, epoch="e")
    slow, fine = feed.watch(), feed.watch()
    for tag in (1, 2, 3):
        feed.publish(hashes(tag))
        if tag < 3:
            assert len(await fine.next()) == 1
    with pytest.raises(ResourceExhausted):
        await slow.next()
    waiting = asyncio.create_task(fine.next())
    assert [s for s, _ in await waiting] == [3]
    waiting = asyncio.create_task(fine.next())
    await asyncio.sleep(0)
    feed.close()
    with pytest.raises(Unavailable):
        await waiting
    with pytest.raises(Unavailable):
        feed.watch()
    slow.close()
    fine.close()
    assert feed.watchers == 0
