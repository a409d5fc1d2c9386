"""The live feed: sequencing, filters, slow consumers, resumption, bounds, close."""

from __future__ import annotations

import asyncio

import pytest

from services.edge_peer.feed import FeedClosed, LiveFeed, SlowConsumer, SubscriptionFilter
from wakucodec.bloom import topic_to_bloom
from wakucodec.envelope import Envelope, make_envelope

A, B = bytes.fromhex("a1b2c3d4"), bytes.fromhex("5e6f7a8b")
PEER = bytes(range(32))


def _envs(count: int, topic: bytes = A, first: int = 0) -> list[Envelope]:
    return [
        make_envelope(expiry=2000, ttl=100, topic=topic, data=bytes([i % 256]) * 10, nonce=i)
        for i in range(first, first + count)
    ]


def _feed(**kw: int) -> LiveFeed:
    return LiveFeed(replay_envelopes=kw.get("replay", 100), replay_bytes=kw.get("bytes", 1 << 20), epoch="e1")


async def test_sequences_and_filters() -> None:
    feed = _feed()
    everything = feed.subscribe(SubscriptionFilter(include_local=True), max_queue=100)
    remote_only = feed.subscribe(SubscriptionFilter(), max_queue=100)
    by_topic = feed.subscribe(SubscriptionFilter(topics=frozenset({B}), include_local=True), max_queue=100)
    by_bloom = feed.subscribe(SubscriptionFilter(bloom=topic_to_bloom(A), include_local=True), max_queue=100)
    feed.publish(PEER, _envs(2, A), 1.0, ephemeral=False)
    feed.publish(None, _envs(2, B, 10), 2.0, ephemeral=True)
    got = await everything.next_batch(10)
    assert [i.sequence for i in got] == [1, 2, 3, 4]
    assert [i.local for i in got] == [False, False, True, True] and got[2].ephemeral
    assert [i.sequence for i in await remote_only.next_batch(10)] == [1, 2]
    assert [i.sequence for i in await by_topic.next_batch(10)] == [3, 4]
    assert [i.sequence for i in await by_bloom.next_batch(10)] == [1, 2]
    assert feed.stats.published == 4 and feed.sequence == 4


async def test_batches_are_capped_and_wait_for_more() -> None:
    feed = _feed()
    sub = feed.subscribe(SubscriptionFilter(), max_queue=100)
    feed.publish(PEER, _envs(5), 1.0, ephemeral=False)
    assert len(await sub.next_batch(2)) == 2
    assert len(await sub.next_batch(10)) == 3
    waiter = asyncio.create_task(sub.next_batch(10))
    await asyncio.sleep(0)
    assert not waiter.done()
    feed.publish(PEER, _envs(1, first=9), 1.0, ephemeral=False)
    assert [i.sequence for i in await asyncio.wait_for(waiter, 1)] == [6]


async def test_overflow_ends_the_subscription_as_slow_consumer() -> None:
    feed = _feed()
    slow = feed.subscribe(SubscriptionFilter(), max_queue=3)
    fast = feed.subscribe(SubscriptionFilter(), max_queue=100)
    feed.publish(PEER, _envs(4), 1.0, ephemeral=False)
    with pytest.raises(SlowConsumer) as err:
        await slow.next_batch(10)
    assert err.value.details["reason"] == "SLOW_CONSUMER"
    assert len(await fast.next_batch(10)) == 4  # publishing never waited, others unaffected
    assert feed.stats.slow_consumers == 1
    size = len(_envs(1)[0].raw)
    by_bytes = feed.subscribe(SubscriptionFilter(), max_queue=100, max_bytes=2 * size)
    feed.publish(PEER, _envs(2, first=20), 1.0, ephemeral=False)
    assert len(await by_bytes.next_batch(1)) == 1  # draining frees room
    feed.publish(PEER, _envs(2, first=30), 1.0, ephemeral=False)
    with pytest.raises(SlowConsumer):
        await by_bytes.next_batch(10)


async def test_resume_exact_after_restart_and_too_old() -> None:
    feed = _feed(replay=5)
    feed.publish(PEER, _envs(8), 1.0, ephemeral=False)  # the ring keeps 4..8
    exact = feed.subscribe(SubscriptionFilter(), max_queue=100, resume_epoch="e1", after_sequence=5)
    assert exact.resumed and [i.sequence for i in await exact.next_batch(10)] == [6, 7, 8]
    edge = feed.subscribe(SubscriptionFilter(), max_queue=100, resume_epoch="e1", after_sequence=3)
    assert edge.resumed and [i.sequence for i in await edge.next_batch(10)] == [4, 5, 6, 7, 8]
    old = feed.subscribe(SubscriptionFilter(), max_queue=100, resume_epoch="e1", after_sequence=1)
    assert not old.resumed and [i.sequence for i in await old.next_batch(10)] == [4, 5, 6, 7, 8]
    other = feed.subscribe(SubscriptionFilter(), max_queue=100, resume_epoch="e0", after_sequence=7)
    assert not other.resumed and other.queued == 5
    live = feed.subscribe(SubscriptionFilter(), max_queue=100)
    assert not live.resumed and live.queued == 0
    current = feed.subscribe(SubscriptionFilter(), max_queue=100, resume_epoch="e1", after_sequence=8)
    assert current.resumed and current.queued == 0


def test_ring_is_bounded_by_bytes() -> None:
    envs = _envs(10)
    feed = LiveFeed(replay_envelopes=100, replay_bytes=3 * len(envs[0].raw), epoch="e")
    feed.publish(PEER, envs, 1.0, ephemeral=False)
    assert feed.oldest_sequence == 8
    off = LiveFeed(replay_envelopes=0, replay_bytes=0)
    off.publish(PEER, envs, 1.0, ephemeral=False)
    assert off.oldest_sequence is None


async def test_close_drains_then_raises() -> None:
    feed = _feed()
    sub = feed.subscribe(SubscriptionFilter(), max_queue=10)
    waiting = feed.subscribe(SubscriptionFilter(), max_queue=10)
    task = asyncio.create_task(waiting.next_batch(10))
    feed.publish(PEER, _envs(1), 1.0, ephemeral=False)
    assert len(await task) == 1
    task = asyncio.create_task(waiting.next_batch(10))
    await asyncio.sleep(0)
    feed.close()
    with pytest.raises(FeedClosed):
        await asyncio.wait_for(task, 1)
    assert len(await sub.next_batch(10)) == 1
    with pytest.raises(FeedClosed):
        await sub.next_batch(10)
    with pytest.raises(FeedClosed):
        feed.subscribe(SubscriptionFilter(), max_queue=1)
    sub.close()
    assert feed.subscribers == 1
