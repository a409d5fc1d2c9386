"""Write batching with back-pressure and de-duplication, acknowledging only what the sink made durable.

Many concurrent callers :meth:`Batcher.submit` items (envelopes, keyed by hash). One background task cuts the
queue into writes of at most ``max_items`` items / ``max_bytes`` bytes, as soon as a write is full or the
oldest queued item has waited ``max_delay_s``, and hands each write to the sink (the archive) with at most
``max_inflight`` writes outstanding. Guarantees:

- **Acknowledge after durable.** A caller's ``submit`` returns only after every write holding one of its
  items returned; if such a write fails, ``submit`` raises that error and nothing of it is acknowledged.
  A failed write affects only the callers with items in it; later writes go on normally.
- **Bounded memory.** At most ``max_pending_items`` items and ``max_pending_bytes`` bytes are queued or being
  written; ``submit`` waits (first come, first served) for room, item by item, so a batch larger than the
  bound still gets through as earlier writes complete. An item bigger than the byte bound is admitted
  alone, when nothing else is pending.
- **De-duplication.** An item whose key is queued or being written joins that entry: no second write, and
  it is reported CACHED once the first write succeeds (or fails with it). Keys the sink accepted are kept
  in a bounded LRU; a repeat is CACHED at once, without a write.

Pure asyncio: no gRPC, no metrics library (an optional :class:`BatcherObserver` is told about writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from meshcore.errors import Internal
from meshcore.logging import trim
from services.ingest.model import ShuttingDown

__all__ = ["Batcher", "BatcherObserver", "Item", "Outcome", "Result", "SeenCache", "Sink"]

P = TypeVar("P")

_log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    """What became of one submitted item."""

    INSERTED = "inserted"
    """The sink stored it now."""
    DUPLICATE = "duplicate"
    """The sink already had it; nothing written."""
    CACHED = "cached"
    """Known to the batcher (seen cache, or the same key earlier in the window); no write of its own."""
    INVALID = "invalid"
    """The sink refused it; ``Result.detail`` says why."""
    EXPIRED = "expired"
    """The sink did not write it because its retention had already run out; ``Result.detail`` says so."""


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of one item, with the sink's reason when it is INVALID."""

    outcome: Outcome
    """What happened."""
    detail: str = ""
    """The sink's explanation for INVALID or EXPIRED; empty otherwise."""


_CACHED = Result(Outcome.CACHED)

Sink = Callable[[Sequence[P]], Awaitable[Sequence[Result]]]
"""Writes payloads durably, returning an INSERTED/DUPLICATE/INVALID/EXPIRED result per payload in order."""


@dataclass(frozen=True, slots=True)
class Item(Generic[P]):
    """One thing to write: its de-duplication key, its size in bytes and the payload for the sink."""

    key: bytes
    """De-duplication key (the envelope hash)."""
    size: int
    """Bytes it counts against the batch and pending bounds."""
    payload: P
    """What the sink receives."""


class BatcherObserver(Protocol):
    """Receives the batcher's measurements (the service's metrics implement it)."""

    def write_done(self, items: int, seconds: float, failed: bool) -> None:
        """A write of ``items`` items took ``seconds``; ``failed`` if the sink raised."""

    def pending_changed(self, items: int, size: int) -> None:
        """Items and bytes now queued or being written."""


class SeenCache:
    """A bounded LRU set of keys (envelope hashes) the sink has accepted; capacity 0 disables it."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self.capacity = capacity
        self._keys: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def hit(self, key: bytes) -> bool:
        """Whether ``key`` is known; a hit makes it the most recently used."""
        if key in self._keys:
            self._keys.move_to_end(key)
            return True
        return False

    def add(self, key: bytes) -> None:
        """Remember ``key``, evicting the least recently used one beyond capacity."""
        if not self.capacity:
            return
        self._keys[key] = None
        self._keys.move_to_end(key)
        if len(self._keys) > self.capacity:
            self._keys.popitem(last=False)


@dataclass(eq=False, slots=True)
class _Ticket:
    """One ``submit`` call: resolved when its last entry is written, failed by the first failed write."""

    future: asyncio.Future[None]
    remaining: int = 0


@dataclass(eq=False, slots=True)
class _Entry(Generic[P]):
    """One queued or in-flight key, with every submit waiting for it."""

    item: Item[P]
    queued_at: float
    tickets: list[_Ticket] = field(default_factory=list)
    result: Result | None = None

    def done(self, result: Result) -> None:
        self.result = result
        for ticket in self.tickets:
            ticket.remaining -= 1
            if not ticket.remaining and not ticket.future.done():
                ticket.future.set_result(None)

    def failed(self, error: BaseException) -> None:
        for ticket in self.tickets:
            if not ticket.future.done():
                ticket.future.set_exception(error)


@dataclass(eq=False, slots=True)
class _Waiter:
    size: int
    future: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def _retrieve(future: asyncio.Future[None]) -> None:
    # Mark a failure as retrieved: a caller that was cancelled never awaits its future, and asyncio would
    # otherwise log "exception was never retrieved".
    if not future.cancelled():
        future.exception()


class Batcher(Generic[P]):
    """Coalesces items from concurrent callers into bounded, pipelined sink writes (module docstring)."""

    def __init__(
        self,
        sink: Sink[P],
        *,
        max_items: int,
        max_bytes: int,
        max_delay_s: float,
        max_pending_items: int,
        max_pending_bytes: int,
        max_inflight: int = 1,
        seen_cache_size: int = 0,
        observer: BatcherObserver | None = None,
    ) -> None:
        if (
            min(max_items, max_bytes, max_pending_items, max_pending_bytes, max_inflight) < 1
            or max_delay_s < 0
        ):
            raise ValueError("batcher bounds must be >= 1 and the delay >= 0")
        self._sink = sink
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._max_delay_s = max_delay_s
        self._max_pending_items = max_pending_items
        self._max_pending_bytes = max_pending_bytes
        self._observer = observer
        self.seen = SeenCache(seen_cache_size)
        """Keys the sink accepted (read-only for callers; exposed for tests and stats)."""
        self._pending: dict[bytes, _Entry[P]] = {}  # queued or being written, by key
        self._queue: deque[_Entry[P]] = deque()
        self._queued_bytes = 0
        self._pending_bytes = 0
        self._waiters: deque[_Waiter] = deque()
        self._reserved_items = 0  # room granted to waiters that have not enqueued yet
        self._reserved_bytes = 0
        self._wakeup = asyncio.Event()
        self._slots = asyncio.Semaphore(max_inflight)
        self._writes: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._closing = False

    # ------------------------------------------------------------------------------------------ callers

    @property
    def pending_items(self) -> int:
        """Items queued or being written."""
        return len(self._pending)

    @property
    def pending_bytes(self) -> int:
        """Bytes of the items queued or being written."""
        return self._pending_bytes

    @property
    def waiting_callers(self) -> int:
        """Items whose callers wait for room (back-pressure in effect when > 0)."""
        return len(self._waiters)

    async def submit(self, items: Sequence[Item[P]]) -> list[Result]:
        """Write ``items`` (through the batches) and return one result per item, once all are durable.

        Raises the sink's error if a write holding one of them failed, and :class:`ShuttingDown` once
        :meth:`close` has begun. Cancelling the caller leaves its queued items to be written anyway.
        """
        # `remaining` starts at 1 for this call itself, so the ticket cannot resolve while items are still
        # being admitted (an earlier item's write may finish while a later one waits for room).
        ticket = _Ticket(asyncio.get_running_loop().create_future(), remaining=1)
        ticket.future.add_done_callback(_retrieve)
        targets: list[Result | _Entry[P]] = []
        joined: list[bool] = []
        try:
            for item in items:
                target, was_joined = self._admit_now(item)
                if target is None:
                    self._pending_changed()
                    target, was_joined = await self._admit_after_wait(item)
                if isinstance(target, _Entry):
                    # Synchronously after admission: the entry cannot have completed in between.
                    target.tickets.append(ticket)
                    ticket.remaining += 1
                targets.append(target)
                joined.append(was_joined)
        finally:
            self._pending_changed()
        ticket.remaining -= 1
        if ticket.remaining or ticket.future.done():
            # The caller's own future (cancelling it touches nobody else); raises a write's failure.
            await ticket.future
        out: list[Result] = []
        for target, was_joined in zip(targets, joined, strict=True):
            if isinstance(target, Result):
                out.append(target)
                continue
            result = target.result
            assert result is not None  # the ticket resolves only once every entry has its result
            stored = result.outcome in (Outcome.INSERTED, Outcome.DUPLICATE)
            out.append(_CACHED if was_joined and stored else result)
        return out

    def _known(self, item: Item[P]) -> tuple[Result | _Entry[P] | None, bool]:
        """A cached answer, or the pending entry to join (True), or None when ``item`` must be queued."""
        if self.seen.hit(item.key):
            return _CACHED, False
        entry = self._pending.get(item.key)
        if entry is not None:
            return entry, True
        return None, False

    def _admit_now(self, item: Item[P]) -> tuple[Result | _Entry[P] | None, bool]:
        """Answer, join or queue ``item`` without waiting; (None, False) when it must wait for room."""
        if self._closing:
            raise ShuttingDown()
        target, joined = self._known(item)
        if target is not None:
            return target, joined
        if not self._waiters and self._has_room(item.size):  # first come, first served
            return self._enqueue(item, reserved=False), False
        return None, False

    async def _admit_after_wait(self, item: Item[P]) -> tuple[Result | _Entry[P], bool]:
        """Wait for room, then answer, join or queue ``item``."""
        await self._wait_for_room(item.size)
        # Room was reserved for us; the key may have been queued or accepted while we waited.
        target, joined = self._known(item)
        if target is not None or self._closing:
            self._release(1, item.size)
            if target is None:
                raise ShuttingDown()
            return target, joined
        return self._enqueue(item, reserved=True), False

    def _has_room(self, size: int) -> bool:
        if not self._pending and not self._reserved_items:
            return True  # anything fits into an empty batcher, even an item above the byte bound
        return (
            len(self._pending) + self._reserved_items < self._max_pending_items
            and self._pending_bytes + self._reserved_bytes + size <= self._max_pending_bytes
        )

    async def _wait_for_room(self, size: int) -> None:
        waiter = _Waiter(size)
        self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled() and waiter.future.exception() is None:
                self._release(1, size)  # granted just before the cancellation arrived: give it back
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
                self._grant()
            raise

    def _grant(self) -> None:
        """Give room to waiters at the head of the line, in order, while it lasts."""
        while self._waiters:
            head = self._waiters[0]
            if head.future.done():  # cancelled
                self._waiters.popleft()
                continue
            if not self._has_room(head.size):
                return
            self._waiters.popleft()
            self._reserved_items += 1
            self._reserved_bytes += head.size
            head.future.set_result(None)

    def _release(self, items: int, size: int) -> None:
        """Return reserved room that was not used."""
        self._reserved_items -= items
        self._reserved_bytes -= size
        self._grant()

    def _enqueue(self, item: Item[P], *, reserved: bool) -> _Entry[P]:
        if reserved:
            self._reserved_items -= 1
            self._reserved_bytes -= item.size
        entry = _Entry(item, time.monotonic())
        self._pending[item.key] = entry
        self._pending_bytes += item.size
        self._queue.append(entry)
        self._queued_bytes += item.size
        self._wakeup.set()
        return entry

    def _pending_changed(self) -> None:
        if self._observer is not None:
            self._observer.pending_changed(len(self._pending), self._pending_bytes)

    # ------------------------------------------------------------------------------------------ writer

    def start(self) -> None:
        """Start the background writer (call from the event loop that will run it)."""
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run(), name="ingest-batcher")

    async def close(self) -> None:
        """Stop taking items, write everything queued (without waiting for the delay), wait for the writes.

        Callers still waiting for room get :class:`ShuttingDown`. Idempotent.
        """
        self._closing = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.future.done():
                waiter.future.set_exception(ShuttingDown())
        self._wakeup.set()
        if self._runner is not None:
            await asyncio.shield(self._runner)
        if self._writes:
            await asyncio.wait(set(self._writes))

    async def _run(self) -> None:
        try:
            await self._run_writes()
        except BaseException as exc:
            # A bug here must not leave callers waiting forever: fail whatever is still queued.
            error = exc if isinstance(exc, Exception) else ShuttingDown("batcher stopped")
            self._closing = True
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.future.done():
                    waiter.future.set_exception(error)
            while self._queue:
                entry = self._queue.popleft()
                self._queued_bytes -= entry.item.size
                del self._pending[entry.item.key]
                self._pending_bytes -= entry.item.size
                entry.failed(error)
            self._pending_changed()
            raise

    async def _run_writes(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            # Wait for a full write or for the oldest item's delay, whichever comes first.
            deadline = self._queue[0].queued_at + self._max_delay_s
            while not self._closing and not self._write_full():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), left)
            await self._slots.acquire()
            # Taken only now: what arrived while every slot was busy joins this write.
            batch = self._take()
            task = loop.create_task(self._write(batch), name="ingest-batcher-write")
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    def _write_full(self) -> bool:
        return len(self._queue) >= self._max_items or self._queued_bytes >= self._max_bytes

    def _take(self) -> list[_Entry[P]]:
        batch: list[_Entry[P]] = []
        size = 0
        while self._queue and len(batch) < self._max_items:
            entry = self._queue[0]
            if batch and size + entry.item.size > self._max_bytes:
                break
            self._queue.popleft()
            batch.append(entry)
            size += entry.item.size
        self._queued_bytes -= size
        return batch

    async def _write(self, batch: list[_Entry[P]]) -> None:
        start = time.perf_counter()
        failed = True
        try:
            results = await self._sink([entry.item.payload for entry in batch])
            if len(results) != len(batch):
                raise Internal(
                    "archive answered a write with the wrong number of results",
                    {"items": len(batch), "results": len(results)},
                )
        except BaseException as exc:  # CancelledError too: nobody may wait forever
            error = exc if isinstance(exc, Exception) else ShuttingDown("write cancelled")
            _log.warning("a write of %d items failed; its callers get the error: %s", len(batch), trim(error))
            for entry in batch:
                entry.failed(error)
            if not isinstance(exc, Exception):
                raise
        else:
            failed = False
            for entry, result in zip(batch, results, strict=True):
                if result.outcome in (Outcome.INSERTED, Outcome.DUPLICATE):
                    self.seen.add(entry.item.key)  # before the key leaves _pending: no window of doubt
                entry.done(result)
        finally:
            for entry in batch:
                del self._pending[entry.item.key]
                self._pending_bytes -= entry.item.size
            self._slots.release()
            self._pending_changed()
            self._grant()
            if self._observer is not None:
                self._observer.write_done(len(batch), time.perf_counter() - start, failed)
