"""Live fan-out of committed events to the StreamEvents and PollEvents consumers of this replica.

Events reach the hub only after they are durable: the writer publishes a commit's events once the store
acknowledged it, and a replica that is not the writer publishes what it reads back from the store's event
log (:class:`~services.subscription.recorder.Recorder`'s tail). The hub keeps sequences strictly
increasing: an event at or below the last one published is dropped, so the writer and the tail may both
offer the same events.

Each consumer has a bounded buffer: a consumer that lets more than ``capacity`` events pile up unread is
ended (``overflowed``; the servicer answers RESOURCE_EXHAUSTED, SLOW_CONSUMER) instead of making the
writer wait or silently losing events; it resumes after its last sequence from the retained log.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from msgstore.types import Event, EventType

__all__ = ["Consumer", "EventFilter", "EventHub"]


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events a consumer wants (``mailmesh.subscription.v1.EventFilter``); empty fields match all."""

    types: frozenset[EventType] = frozenset()
    subscription_id: str = ""
    request_id: str = ""

    def matches(self, event: Event) -> bool:
        """Whether ``event`` passes; health events pass the record filters (they report no record).

        Revision entries (``UNSPECIFIED``: a record change without Messaging API event) pass only a filter
        that names them (PollRecords'); "all types" means every Messaging API event.
        """
        if self.types and event.type not in self.types:
            return False
        if event.type is EventType.UNSPECIFIED and not self.types:
            return False
        record = event.record
        if record is None:
            return True
        if self.subscription_id and self.subscription_id not in record.subscription_ids:
            return False
        return not (self.request_id and record.request_id != self.request_id)


@dataclass(eq=False)
class Consumer:
    """One live consumer: a bounded buffer of matching events."""

    filter: EventFilter
    capacity: int
    buffer: deque[Event] = field(default_factory=deque)
    overflowed: bool = False
    closed: bool = False
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, event: Event) -> None:
        """Buffer ``event`` if it matches; overflow ends the consumer."""
        if self.closed or self.overflowed or not self.filter.matches(event):
            return
        if len(self.buffer) >= self.capacity:
            self.overflowed = True
            self.buffer.clear()
        else:
            self.buffer.append(event)
        self._ready.set()

    def close(self) -> None:
        """End the consumer (service shutdown): its waiter wakes up with nothing."""
        self.closed = True
        self._ready.set()

    async def next_batch(self, timeout: float | None = None) -> list[Event]:
        """The buffered events (waiting up to ``timeout`` for one); empty on timeout, overflow or close."""
        if not self.buffer and not self.overflowed and not self.closed:
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return []
        batch = list(self.buffer)
        self.buffer.clear()
        return batch

    @property
    def lag(self) -> int:
        """Events buffered and not yet taken."""
        return len(self.buffer)


class EventHub:
    """The replica's live event feed."""

    def __init__(self, *, capacity: int) -> None:
        self._capacity = capacity
        self._consumers: set[Consumer] = set()
        self._last = 0
        self.on_change: Callable[[], None] | None = None
        """Called when consumers come and go (metrics)."""

    @property
    def last_sequence(self) -> int:
        """The greatest sequence published so far (0 before any)."""
        return self._last

    def advance(self, sequence: int) -> None:
        """Start (or move) the feed at ``sequence`` without publishing: what a replica read at start."""
        self._last = max(self._last, sequence)

    def publish(self, events: Sequence[Event]) -> int:
        """Offer ``events`` (ascending) to every consumer; returns how many were new."""
        fresh = 0
        for event in events:
            if event.sequence <= self._last:
                continue
            self._last = event.sequence
            fresh += 1
            for consumer in self._consumers:
                consumer.offer(event)
        return fresh

    def subscribe(self, flt: EventFilter) -> Consumer:
        """A new consumer of every event published from now on."""
        consumer = Consumer(flt, self._capacity)
        self._consumers.add(consumer)
        if self.on_change:
            self.on_change()
        return consumer

    def unsubscribe(self, consumer: Consumer) -> None:
        """Stop feeding ``consumer``."""
        self._consumers.discard(consumer)
        if self.on_change:
            self.on_change()

    def close(self) -> None:
        """End every consumer (shutdown)."""
        for consumer in list(self._consumers):
            consumer.close()

    @property
    def consumers(self) -> int:
        """Live consumers."""
        return len(self._consumers)

    @property
    def overflowed(self) -> int:
        """Consumers that overflowed and have not been ended yet (their stream ends once its handler
        gets past the gRPC write it is blocked in, i.e. when the client reads again)."""
        return sum(1 for c in self._consumers if c.overflowed)

    @property
    def slowest_lag(self) -> int:
        """Events buffered by the slowest consumer."""
        return max((c.lag for c in self._consumers), default=0)
