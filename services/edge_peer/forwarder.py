"""Forwarding accepted envelopes to ingest over one long-lived bidi stream, with a bounded buffer.

::

    relay ──accept()──▶ IngestForwarder.submit ──▶ queue ──▶ stream (≤ window unacked) ──▶ Ingest
                              ▲ waits while the buffer is full             acks ◀──┘ free the buffer

- **Acknowledged ⇒ forgotten.** A batch stays in the buffer (queued or sent-but-unacknowledged) until its
  IngestAck arrives. When the stream fails (ingest down, restarted, UNAVAILABLE), every unacknowledged batch
  goes back to the front of the queue, in order, and is re-sent on the next stream (ingest and the archive
  are idempotent by envelope hash). Reconnects back off exponentially from 0.1 s to ``reconnect_max_s``.
- **Back-pressure.** The buffer is bounded in envelopes and bytes. :meth:`submit` waits for room up to
  ``max_wait_s`` — the relay awaits it in the sending peer's handler, so that peer is slowed down through
  devp2p's bounded queue and TCP, other peers are not. A batch that still finds no room is **not** silently
  dropped: it is counted in ``dropped["buffer_full"]`` (``edge_ingest_dropped_envelopes_total``) and logged
  at WARNING (at most once a second, with the count since the previous line). What is still buffered at
  shutdown after the flush timeout is counted as ``dropped["shutdown"]``.
- **Window.** At most ``window`` batches are unacknowledged on a stream (ingest reads 16 and then stops).

Pure asyncio; the gRPC side is :class:`IngestPort` (``clients.IngestClient``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from meshcore.errors import MeshError

__all__ = ["ForwarderStats", "IngestAck", "IngestForwarder", "IngestPort", "OutgoingBatch"]

log = logging.getLogger(__name__)

#: First reconnect delay, seconds.
RECONNECT_MIN_S = 0.1
#: Drops are logged at most this often (each log line carries the envelopes counted since the last one).
DROP_LOG_INTERVAL_S = 1.0


@dataclass(eq=False, slots=True)
class OutgoingBatch:
    """The new envelopes of one Messages packet (or one Publish call), as sent to ingest."""

    envelopes: Sequence[bytes]
    """Raw envelope RLP, never re-encoded."""
    source_peer_id: bytes
    """32-byte node ID of the relaying peer; empty for local envelopes."""
    received_at: float
    """UNIX time the packet was accepted (ingest validates against it)."""
    size: int
    """Sum of the envelope sizes."""
    batch_id: int = 0
    """Id on the current stream (set when sent)."""
    attempts: int = 0
    """Times it was written to a stream."""


@dataclass(frozen=True, slots=True)
class IngestAck:
    """An IngestAck, reduced to what the edge peer needs."""

    batch_id: int
    accepted: int
    duplicates: int
    rejected: int


class IngestPort(Protocol):
    """One Ingest stream: write batches, read acks. Failures raise :class:`meshcore.errors.MeshError`."""

    def stream(self, batches: AsyncIterator[OutgoingBatch]) -> AsyncIterator[IngestAck]:
        """Open a stream sending ``batches``; yield its acks until it ends."""
        ...


@dataclass(slots=True)
class ForwarderStats:
    """Counters and levels of the forwarder, exported as ``edge_ingest_*`` metrics."""

    batches_sent: int = 0
    batches_resent: int = 0
    batches_acked: int = 0
    envelopes_submitted: int = 0
    envelopes_accepted: int = 0
    envelopes_duplicate: int = 0
    envelopes_rejected: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    """Envelopes that could not be forwarded, by reason: ``buffer_full``, ``shutdown``."""
    backpressure_waits: int = 0
    """submit() calls that had to wait for room."""
    streams_opened: int = 0
    stream_failures: Counter[str] = field(default_factory=Counter)
    """Streams that ended, by error class (``Unavailable``, ``ended`` when the server closed it)."""
    connected: bool = False


class IngestForwarder:
    """The EnvelopeSink's ingest half: buffer, stream, acks, reconnects (see the module docstring)."""

    def __init__(
        self,
        port: IngestPort,
        *,
        max_envelopes: int,
        max_bytes: int,
        max_wait_s: float,
        window: int = 16,
        reconnect_max_s: float = 5.0,
    ) -> None:
        if window < 1 or max_envelopes < 1 or max_bytes < 1:
            raise ValueError("window and buffer bounds must be positive")
        self._port = port
        self.max_envelopes = max_envelopes
        self.max_bytes = max_bytes
        self.max_wait_s = max_wait_s
        self.window = window
        self.reconnect_max_s = max(reconnect_max_s, RECONNECT_MIN_S)
        self.stats = ForwarderStats()
        self._queue: deque[OutgoingBatch] = deque()
        self._unacked: dict[int, OutgoingBatch] = {}
        self._ids = itertools.count(1)
        self.buffered_envelopes = 0
        self.buffered_bytes = 0
        self._room = asyncio.Event()
        self._work = asyncio.Event()
        self._empty = asyncio.Event()
        self._empty.set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._generation = 0
        self._unlogged = 0
        self._last_drop_log = -DROP_LOG_INTERVAL_S

    # --- intake ------------------------------------------------------------------------------------------

    def _fits(self, count: int, size: int) -> bool:
        if self.buffered_envelopes == 0:
            return True  # one oversized batch may always go alone
        return (
            self.buffered_envelopes + count <= self.max_envelopes
            and self.buffered_bytes + size <= self.max_bytes
        )

    async def submit(self, peer_id: bytes | None, envelopes: Sequence[bytes], received_at: float) -> bool:
        """Buffer one batch for ingest, waiting up to ``max_wait_s`` for room; False if it was dropped."""
        if not envelopes:
            return True
        count, size = len(envelopes), sum(len(e) for e in envelopes)
        self.stats.envelopes_submitted += count
        if self._closing:
            self._drop("shutdown", count, size)
            return False
        if not self._fits(count, size):
            self.stats.backpressure_waits += 1
            try:
                async with asyncio.timeout(self.max_wait_s):
                    while not self._fits(count, size):
                        self._room.clear()
                        await self._room.wait()
            except TimeoutError:
                self._drop("buffer_full", count, size)
                return False
        self._queue.append(OutgoingBatch(list(envelopes), peer_id or b"", received_at, size))
        self.buffered_envelopes += count
        self.buffered_bytes += size
        self._empty.clear()
        self._work.set()
        return True

    def _drop(self, reason: str, count: int, size: int) -> None:
        """Count (always) and log (at most once per second, with what accumulated since) a lost batch."""
        self.stats.dropped[reason] += count
        self._unlogged += count
        now = time.monotonic()
        if now - self._last_drop_log < DROP_LOG_INTERVAL_S:
            return
        self._last_drop_log = now
        log.warning(
            "ingest buffer: %d envelopes not forwarded (%s; last batch %d bytes); buffered %d envelopes / "
            "%d bytes; %d dropped in total",
            self._unlogged,
            reason,
            size,
            self.buffered_envelopes,
            self.buffered_bytes,
            sum(self.stats.dropped.values()),
            extra={"dropped_envelopes": self._unlogged, "reason": reason},
        )
        self._unlogged = 0

    def _release(self, batch: OutgoingBatch) -> None:
        self.buffered_envelopes -= len(batch.envelopes)
        self.buffered_bytes -= batch.size
        self._room.set()
        if self.buffered_envelopes == 0:
            self._empty.set()

    # --- the stream --------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the stream task (call from the event loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="edge-ingest")

    async def _run(self) -> None:
        delay = RECONNECT_MIN_S
        while True:
            acked_before = self.stats.batches_acked
            try:
                await self._session()
                reason = "ended"
            except MeshError as err:
                reason = type(err).__name__
                log.warning("ingest stream failed: %s; reconnecting in %.1f s", err.message, delay)
            finally:
                self.stats.connected = False
                self._requeue()
            self.stats.stream_failures[reason] += 1
            if self.stats.batches_acked > acked_before:
                delay = RECONNECT_MIN_S  # the stream worked for a while: start the backoff over
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))  # backoff between reconnects, not sync
            delay = min(delay * 2, self.reconnect_max_s)

    def _requeue(self) -> None:
        """Put every unacknowledged batch back at the front of the queue, in send order."""
        if self._unacked:
            self._queue.extendleft(reversed(list(self._unacked.values())))
            self._unacked.clear()
            self._work.set()

    async def _session(self) -> None:
        self.stats.streams_opened += 1
        self._generation += 1
        ack_seen = asyncio.Event()
        acks = self._port.stream(self._requests(self._generation, ack_seen))
        try:
            async for ack in acks:
                if not self.stats.connected:
                    self.stats.connected = True
                    log.info(
                        "ingest stream delivering acknowledgements (stream %d)", self.stats.streams_opened
                    )
                batch = self._unacked.pop(ack.batch_id, None)
                if batch is None:
                    log.warning("ingest acknowledged unknown batch %d", ack.batch_id)
                    continue
                stats = self.stats
                stats.batches_acked += 1
                stats.envelopes_accepted += ack.accepted
                stats.envelopes_duplicate += ack.duplicates
                stats.envelopes_rejected += ack.rejected
                self._release(batch)
                ack_seen.set()
        finally:
            # The request generator may still be parked in gRPC's writer task: retire it so it never takes
            # a batch for a dead stream (the batches it sent are requeued by the caller).
            self._generation += 1
            self._work.set()
            ack_seen.set()
            aclose = getattr(acks, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _requests(self, generation: int, ack_seen: asyncio.Event) -> AsyncIterator[OutgoingBatch]:
        """Batches for one stream: queued ones in order, never more than ``window`` unacknowledged."""
        while True:
            while not self._queue or len(self._unacked) >= self.window:
                if generation != self._generation:
                    return
                if not self._queue:
                    self._work.clear()
                    await self._work.wait()
                else:
                    ack_seen.clear()
                    await ack_seen.wait()
            if generation != self._generation:
                return
            batch = self._queue.popleft()
            batch.batch_id = next(self._ids)
            batch.attempts += 1
            if batch.attempts > 1:
                self.stats.batches_resent += 1
            self._unacked[batch.batch_id] = batch
            self.stats.batches_sent += 1
            yield batch

    # --- shutdown ----------------------------------------------------------------------------------------

    async def close(self, timeout: float) -> None:
        """Stop intake, wait up to ``timeout`` s for the buffer to drain, then stop the stream.

        Whatever is still buffered then is counted as ``dropped["shutdown"]`` and logged.
        """
        self._closing = True
        if self.buffered_envelopes and self._task is not None:
            try:
                async with asyncio.timeout(timeout):
                    await self._empty.wait()
            except TimeoutError:
                pass
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.buffered_envelopes:
            self._drop("shutdown", self.buffered_envelopes, self.buffered_bytes)
            self._queue.clear()
            self._unacked.clear()
            self.buffered_envelopes = self.buffered_bytes = 0
