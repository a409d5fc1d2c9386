"""The live envelope feed behind ``StreamEnvelopes``: sequence numbers, a bounded replay ring, subscribers.

Every envelope the relay accepts (new and valid, from a peer or a local Publish) gets the next sequence number
of this process's *epoch* and is offered to each subscriber whose filter admits it. A subscriber's queue is
bounded; when it overflows the subscriber is marked slow and its stream ends with RESOURCE_EXHAUSTED
(SLOW_CONSUMER) rather than silently losing envelopes — the client resumes from its last sequence, served from
the replay ring while the ring still holds it. Publishing never waits for a subscriber.

Pure asyncio: no gRPC, no protos.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from meshcore.errors import ResourceExhausted, Unavailable
from wakucodec.bloom import bloom_match
from wakucodec.envelope import Envelope

__all__ = ["FeedStats", "LiveEnvelope", "LiveFeed", "SlowConsumer", "Subscription", "SubscriptionFilter"]


class SlowConsumer(ResourceExhausted):
    """The subscriber fell further behind than its queue allows; it should resume from its last sequence."""

    def __init__(self, queued: int, max_bytes: int) -> None:
        super().__init__(
            f"slow consumer: more than {queued} envelopes or {max_bytes} bytes queued; resume from the last "
            "sequence received",
            {"reason": "SLOW_CONSUMER"},
        )


class FeedClosed(Unavailable):
    """The edge peer is shutting down; reconnect (to another replica) and resume."""

    def __init__(self) -> None:
        super().__init__("edge peer is shutting down", {"reason": "DEPENDENCY_UNAVAILABLE"})


@dataclass(frozen=True, slots=True)
class LiveEnvelope:
    """One accepted envelope, as StreamEnvelopes reports it."""

    envelope: Envelope
    source_peer_id: bytes | None
    """32-byte node ID of the peer it first came from; None when published locally."""
    received_at: float
    """UNIX time of acceptance."""
    sequence: int
    """Position in this epoch, from 1."""
    ephemeral: bool = False

    @property
    def local(self) -> bool:
        """Injected through Publish rather than received from a peer."""
        return self.source_peer_id is None


@dataclass(frozen=True, slots=True)
class SubscriptionFilter:
    """Which envelopes a subscriber wants: exact topics, else a bloom (subset rule), else everything."""

    topics: frozenset[bytes] = frozenset()
    bloom: bytes | None = None
    include_local: bool = False

    def admits(self, item: LiveEnvelope) -> bool:
        """Whether ``item`` passes the filter."""
        if item.local and not self.include_local:
            return False
        if self.topics:
            return item.envelope.topic in self.topics
        if self.bloom is not None:
            return bloom_match(self.bloom, item.envelope.bloom)
        return True


@dataclass(slots=True)
class FeedStats:
    """Counters of the feed, exported as ``edge_stream_*`` metrics."""

    published: int = 0
    """Envelopes sequenced."""
    delivered: int = 0
    """Envelopes queued to subscribers (one per subscriber that admitted it)."""
    slow_consumers: int = 0
    """Subscriptions ended because their queue overflowed."""
    resumed: int = 0
    """Subscriptions that continued exactly after their after_sequence."""
    subscriptions: int = 0
    """Subscriptions opened."""


class Subscription:
    """One StreamEnvelopes caller: a bounded queue filled by the feed, drained by the servicer."""

    def __init__(
        self, feed: LiveFeed, flt: SubscriptionFilter, max_queue: int, resumed: bool, max_bytes: int
    ) -> None:
        self._feed = feed
        self.filter = flt
        self.max_queue = max_queue
        self.max_bytes = max_bytes
        self._bytes = 0
        #: True when the stream continues exactly after the requested sequence.
        self.resumed = resumed
        self._queue: deque[LiveEnvelope] = deque()
        self._wake = asyncio.Event()
        self._overflowed = False

    @property
    def epoch(self) -> str:
        """The feed's epoch."""
        return self._feed.epoch

    @property
    def queued(self) -> int:
        """Envelopes waiting to be sent."""
        return len(self._queue)

    def offer(self, item: LiveEnvelope) -> None:
        """Queue ``item`` (the caller checked the filter); mark the subscriber slow on overflow."""
        if self._overflowed:
            return
        size = len(item.envelope.raw)
        if len(self._queue) >= self.max_queue or (self._queue and self._bytes + size > self.max_bytes):
            self._overflowed = True
            self._queue.clear()
            self._bytes = 0
            self._feed.stats.slow_consumers += 1
        else:
            self._queue.append(item)
            self._bytes += size
            self._feed.stats.delivered += 1
        self._wake.set()

    async def next_batch(self, max_batch: int) -> list[LiveEnvelope]:
        """Wait for envelopes and return up to ``max_batch`` of them, in sequence order.

        Raises :class:`SlowConsumer` after an overflow and :class:`FeedClosed` once the feed is closed.
        """
        while True:
            if self._overflowed:
                raise SlowConsumer(self.max_queue, self.max_bytes)
            if self._queue:
                count = min(max_batch, len(self._queue))
                batch = [self._queue.popleft() for _ in range(count)]
                self._bytes -= sum(len(i.envelope.raw) for i in batch)
                return batch
            if self._feed.closed:
                raise FeedClosed()
            self._wake.clear()
            await self._wake.wait()

    def wake(self) -> None:
        """Wake a waiting :meth:`next_batch` (used when the feed closes)."""
        self._wake.set()

    def close(self) -> None:
        """Stop receiving envelopes."""
        self._feed.unsubscribe(self)


class LiveFeed:
    """Sequencer, replay ring and subscriber set of one edge-peer process."""

    def __init__(self, *, replay_envelopes: int, replay_bytes: int, epoch: str | None = None) -> None:
        #: Identifies this process's sequence space.
        self.epoch = epoch or uuid.uuid4().hex
        self.replay_envelopes = replay_envelopes
        self.replay_bytes = replay_bytes
        self.stats = FeedStats()
        self.closed = False
        self._sequence = 0
        self._ring: deque[LiveEnvelope] = deque()
        self._ring_bytes = 0
        self._subscribers: set[Subscription] = set()

    @property
    def sequence(self) -> int:
        """The last sequence number given out."""
        return self._sequence

    @property
    def subscribers(self) -> int:
        """Open subscriptions."""
        return len(self._subscribers)

    @property
    def oldest_sequence(self) -> int | None:
        """Sequence of the oldest envelope still in the replay ring."""
        return self._ring[0].sequence if self._ring else None

    def publish(
        self, peer_id: bytes | None, envelopes: Sequence[Envelope], received_at: float, *, ephemeral: bool
    ) -> None:
        """Sequence ``envelopes`` and offer them to every matching subscriber (never waits)."""
        for env in envelopes:
            self._sequence += 1
            item = LiveEnvelope(env, peer_id, received_at, self._sequence, ephemeral)
            self.stats.published += 1
            self._remember(item)
            for sub in self._subscribers:
                if sub.filter.admits(item):
                    sub.offer(item)

    def _remember(self, item: LiveEnvelope) -> None:
        if self.replay_envelopes <= 0 or self.replay_bytes <= 0:
            return
        self._ring.append(item)
        self._ring_bytes += len(item.envelope.raw)
        while self._ring and (
            len(self._ring) > self.replay_envelopes or self._ring_bytes > self.replay_bytes
        ):
            self._ring_bytes -= len(self._ring.popleft().envelope.raw)

    def subscribe(
        self,
        flt: SubscriptionFilter,
        *,
        max_queue: int,
        max_bytes: int = 64 * 1024 * 1024,
        resume_epoch: str = "",
        after_sequence: int = 0,
    ) -> Subscription:
        """Open a subscription; with a resume point, first queue what the ring holds after it.

        - no ``resume_epoch``: live from now, ``resumed`` False;
        - this epoch and ``after_sequence`` still covered by the ring (or nothing missed): continue exactly
          after it, ``resumed`` True;
        - another epoch (a restarted process) or a point older than the ring: start at the oldest envelope
          the ring holds, ``resumed`` False (envelopes may have been missed).
        """
        if self.closed:
            raise FeedClosed()
        replay: list[LiveEnvelope] = []
        resumed = False
        if resume_epoch:
            oldest = self.oldest_sequence
            if resume_epoch == self.epoch and (
                after_sequence >= self._sequence or (oldest is not None and after_sequence >= oldest - 1)
            ):
                resumed = True
                replay = [i for i in self._ring if i.sequence > after_sequence]
            else:
                replay = list(self._ring)
        sub = Subscription(self, flt, max_queue, resumed, max_bytes)
        for item in replay:
            if flt.admits(item):
                sub.offer(item)
        self._subscribers.add(sub)
        self.stats.subscriptions += 1
        self.stats.resumed += int(resumed)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget a subscription."""
        self._subscribers.discard(sub)

    def close(self) -> None:
        """End every subscription (their next_batch raises FeedClosed once drained)."""
        self.closed = True
        for sub in list(self._subscribers):
            sub.wake()
