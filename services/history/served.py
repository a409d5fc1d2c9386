"""The envelopes this process served, as a live feed behind ``WatchServed`` (history.proto).

MESSAGING-API "Properties of MessageRecord", ``stored``: "populated based on a recurring STORE query ... or
via the History API", and "Acknowledgements": "the stored property MUST be updated for any other messages
received via the History API". An envelope a Query delivered is in the archive, so the subscription service
marks the records carrying its hash stored; this feed tells it which envelopes were delivered.

Every archive chunk a Query delivers becomes one numbered chunk of this process's *epoch* (its hashes,
packed). A ring of recent chunks (bounded by ``ring_hashes`` hashes) lets a watcher resume after the last
chunk it applied; a watcher's queue is bounded too, and one that falls behind is ended (SLOW_CONSUMER)
rather than making Query wait — publishing never waits. Pure asyncio: no gRPC, no protos.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque

from meshcore.errors import ResourceExhausted, Unavailable

__all__ = ["ServedFeed", "ServedWatch"]

HASH_BYTES = 32
Chunk = tuple[int, bytes]  # (sequence, packed 32-byte hashes)


class ServedWatch:
    """One watcher: the chunks published since it started (after its resume point, if the ring held it)."""

    def __init__(self, feed: ServedFeed, resumed: bool, max_chunks: int) -> None:
        self._feed = feed
        self.resumed = resumed
        self._max = max_chunks
        self._bound = max_chunks
        self._queue: deque[Chunk] = deque()
        self._ready = asyncio.Event()
        self.overflowed = False

    @property
    def epoch(self) -> str:
        """The feed's epoch."""
        return self._feed.epoch

    def offer(self, chunk: Chunk) -> None:
        """Queue a chunk; past the bound the watcher is marked slow and stops queueing."""
        if self.overflowed:
            return
        if len(self._queue) >= self._bound:
            self.overflowed = True
            self._queue.clear()
        else:
            self._queue.append(chunk)
        self._ready.set()

    def replay(self, chunks: list[Chunk]) -> None:
        """Queue what the ring held at the start (on top of the bound: the ring is bounded itself)."""
        self._bound = self._max + len(chunks)
        self._queue.extend(chunks)
        self._ready.set()

    def wake(self) -> None:
        """Wake the reader (the feed closed)."""
        self._ready.set()

    async def next(self) -> list[Chunk]:
        """The queued chunks, waiting for one; raises SLOW_CONSUMER or, at shutdown, UNAVAILABLE."""
        while not self._queue:
            if self.overflowed:
                raise ResourceExhausted(
                    f"slow consumer: more than {self._max} served chunks queued; resume after the last "
                    "sequence received",
                    {"reason": "SLOW_CONSUMER"},
                )
            if self._feed.closed:
                raise Unavailable("history-query is shutting down", {"reason": "DEPENDENCY_UNAVAILABLE"})
            self._ready.clear()
            await self._ready.wait()
        chunks = list(self._queue)
        self._queue.clear()
        return chunks

    def close(self) -> None:
        """Stop receiving chunks."""
        self._feed.unwatch(self)


class ServedFeed:
    """Numbered chunks of served envelope hashes, a bounded ring, and watchers."""

    def __init__(self, *, ring_hashes: int, max_queued_chunks: int = 4096, epoch: str | None = None) -> None:
        self.epoch = epoch or uuid.uuid4().hex
        self._ring: deque[Chunk] = deque()
        self._ring_hashes = 0
        self._max_ring = ring_hashes
        self._max_queued = max_queued_chunks
        self._sequence = 0
        self._watchers: set[ServedWatch] = set()
        self.closed = False

    @property
    def sequence(self) -> int:
        """The last chunk's sequence (0 before any)."""
        return self._sequence

    def publish(self, hashes: bytes) -> None:
        """One served chunk (32-byte hashes, concatenated); nothing for an empty one."""
        if not hashes or self.closed:
            return
        self._sequence += 1
        chunk = (self._sequence, hashes)
        self._ring.append(chunk)
        self._ring_hashes += len(hashes) // HASH_BYTES
        while self._ring_hashes > self._max_ring and len(self._ring) > 1:
            self._ring_hashes -= len(self._ring.popleft()[1]) // HASH_BYTES
        for watcher in self._watchers:
            watcher.offer(chunk)

    def watch(self, resume_epoch: str = "", after_sequence: int = 0) -> ServedWatch:
        """A watcher: live from now without ``resume_epoch``; after ``after_sequence`` of this epoch while
        the ring holds it (``resumed``); otherwise from the oldest chunk the ring holds."""
        if self.closed:
            raise Unavailable("history-query is shutting down", {"reason": "DEPENDENCY_UNAVAILABLE"})
        replay: list[Chunk] = []
        resumed = False
        if resume_epoch:
            oldest = self._ring[0][0] if self._ring else self._sequence + 1
            if resume_epoch == self.epoch and oldest - 1 <= after_sequence <= self._sequence:
                resumed = True
                replay = [c for c in self._ring if c[0] > after_sequence]
            else:
                replay = list(self._ring)
        watcher = ServedWatch(self, resumed, self._max_queued)
        watcher.replay(replay)
        self._watchers.add(watcher)
        return watcher

    def unwatch(self, watcher: ServedWatch) -> None:
        """Forget a watcher."""
        self._watchers.discard(watcher)

    def close(self) -> None:
        """End every watch (their next read raises UNAVAILABLE once drained)."""
        self.closed = True
        for watcher in list(self._watchers):
            watcher.wake()

    @property
    def watchers(self) -> int:
        """Open watches."""
        return len(self._watchers)
