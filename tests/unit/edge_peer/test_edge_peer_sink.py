"""The node's sink: live subscribers always, ingest unless ephemeral; the relay waits only on ingest room."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from services.edge_peer.feed import LiveFeed, SubscriptionFilter
from services.edge_peer.forwarder import IngestAck, IngestForwarder, OutgoingBatch
from services.edge_peer.sink import EdgeSink
from wakucodec.envelope import make_envelope

PEER = b"\x02" * 32


class NeverAcks:
    """An IngestPort whose stream takes batches and never answers."""

    def __init__(self) -> None:
        self.received: list[OutgoingBatch] = []

    async def stream(self, batches: AsyncIterator[OutgoingBatch]) -> AsyncIterator[IngestAck]:
        async for batch in batches:
            self.received.append(batch)
        await asyncio.Event().wait()
        yield IngestAck(0, 0, 0, 0)  # pragma: no cover - never reached


async def test_ephemeral_goes_to_subscribers_only_and_back_pressure_reaches_the_caller() -> None:
    feed = LiveFeed(replay_envelopes=10, replay_bytes=1 << 20, epoch="e")
    port = NeverAcks()
    forwarder = IngestForwarder(port, max_envelopes=2, max_bytes=1 << 20, max_wait_s=0.05)
    forwarder.start()
    sink = EdgeSink(feed, forwarder)
    sub = feed.subscribe(SubscriptionFilter(include_local=True), max_queue=10)
    envs = [make_envelope(expiry=100, ttl=10, topic=b"abcd", data=bytes([i]), nonce=i) for i in range(4)]
    await sink.accept(None, envs[:2], 5.0, ephemeral=True)
    await sink.accept(PEER, envs[2:3], 6.0)
    await sink.accept(PEER, envs[3:], 7.0)  # 1 + 1 fits the bound of 2
    await sink.accept(PEER, envs[:1], 8.0)  # full and never acked: waits 50 ms, then counted as dropped
    got = await sub.next_batch(10)
    assert [i.sequence for i in got] == [1, 2, 3, 4, 5] and [i.ephemeral for i in got[:3]] == [
        True,
        True,
        False,
    ]
    assert sink.ephemeral_envelopes == 2
    assert forwarder.stats.dropped["buffer_full"] == 1 and forwarder.buffered_envelopes == 2
    assert forwarder.stats.envelopes_submitted == 3  # ephemeral ones never reached the forwarder
    await forwarder.close(0.01)
    assert [b.envelopes for b in port.received] == [[envs[2].raw], [envs[3].raw]]


async def test_accept_says_whether_the_batch_was_taken() -> None:
    """The node confirms only what the sink took (wakunode EnvelopeSink): a batch the forwarder had to drop
    must come back False, so the peer's Message Response lists it instead of a Batch Ack covering it."""
    feed = LiveFeed(replay_envelopes=10, replay_bytes=1 << 20, epoch="e")
    forwarder = IngestForwarder(NeverAcks(), max_envelopes=1, max_bytes=1 << 20, max_wait_s=0.05)
    forwarder.start()
    sink = EdgeSink(feed, forwarder)
    envs = [make_envelope(expiry=100, ttl=10, topic=b"abcd", data=bytes([i]), nonce=i) for i in range(3)]
    assert await sink.accept(PEER, envs[:1], 5.0) is True
    assert await sink.accept(None, envs[1:2], 6.0, ephemeral=True) is True  # never needs buffer room
    assert await sink.accept(PEER, envs[2:], 7.0) is False  # full and never acked: dropped after 50 ms
    assert forwarder.stats.dropped["buffer_full"] == 1
    await forwarder.close(0.01)
