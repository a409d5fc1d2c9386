"""In-memory implementations of the ports, for tests, benchmarks and the CLI's local mode.

- :class:`MemoryHistory` — a :class:`~wakunode.ports.HistoryBackend` with status-go LevelDB semantics
  (protocol-notes §4.3, §4.4): the request's defaults applied as history-query applies them
  (``HistoryRequest.normalize`` at its clock's time), entries ordered by ``(sent, hash)`` ascending, range
  ``lower ≤ sent ≤ upper``, topics override the bloom, the cursor is ``sent(4, BE) ‖ hash(32)`` of the last
  delivered envelope and the next page starts after it. Like history-query (and unlike status-go) a cursor is
  returned only when a matching envelope remains after the page.
- :class:`MemorySink` — an :class:`~wakunode.ports.EnvelopeSink` that records every call and lets a test wait
  for a number of envelopes.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass

from wakucodec.bloom import bloom_match
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import CURSOR_LENGTH, HistoryRequest
from wakucodec.responses import ZERO_HASH
from wakunode.ports import HistoryBatch, HistoryComplete, HistoryFailure, HistoryItem, MailserverQuery

__all__ = ["FailingHistory", "MemoryHistory", "MemorySink", "SinkCall"]


class MemoryHistory:
    """An archive in a sorted list; :meth:`query` implements the HistoryBackend port."""

    def __init__(self, envelopes: Iterable[Envelope] = (), *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._keys: list[tuple[int, bytes]] = []
        self._entries: list[Envelope] = []
        #: Every query received, in order (for assertions).
        self.queries: list[MailserverQuery] = []
        self.add(envelopes)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, envelopes: Iterable[Envelope]) -> int:
        """Archive envelopes (duplicates by hash are ignored); return how many were new."""
        added = 0
        for env in envelopes:
            key = (env.sent, env.hash)
            index = bisect.bisect_left(self._keys, key)
            if index < len(self._keys) and self._keys[index] == key:
                continue
            self._keys.insert(index, key)
            self._entries.insert(index, env)
            added += 1
        return added

    def _matches(self, env: Envelope, request: HistoryRequest) -> bool:
        if request.topics:
            return env.topic in request.topics
        return bloom_match(request.bloom, env.bloom)

    def select(self, query: MailserverQuery) -> tuple[list[Envelope], bool]:
        """The page for ``query`` and whether more matching envelopes remain after it."""
        request = query.request.normalize(int(self._clock()))
        if request.cursor and len(request.cursor) == CURSOR_LENGTH:
            after = (int.from_bytes(request.cursor[:4], "big"), request.cursor[4:])
            start = bisect.bisect_right(self._keys, after)
        else:  # status-go ignores a cursor of any other length (§4.4)
            start = bisect.bisect_left(self._keys, (request.lower, b""))
        page: list[Envelope] = []
        for index in range(start, len(self._entries)):
            sent, _ = self._keys[index]
            if sent > request.upper:
                break
            env = self._entries[index]
            if sent < request.lower or not self._matches(env, request):
                continue
            if len(page) == request.limit:
                return page, True
            page.append(env)
        return page, False

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryItem]:
        """Yield batches within the query's budgets, then the completion."""
        self.queries.append(query)
        page, more = self.select(query)
        batch: list[bytes] = []
        size = 0
        for env in page:
            full = batch and (
                size + len(env.raw) > query.max_batch_bytes
                or (query.max_batch_envelopes and len(batch) >= query.max_batch_envelopes)
            )
            if full:
                yield HistoryBatch(batch)
                batch, size = [], 0
            batch.append(env.raw)
            size += len(env.raw)
        if batch:
            yield HistoryBatch(batch)
        last = page[-1] if page else None
        cursor = last.sent.to_bytes(4, "big") + last.hash if more and last is not None else b""
        yield HistoryComplete(cursor, last.hash if last is not None else ZERO_HASH)


class FailingHistory(MemoryHistory):
    """A backend that answers every query with a failure (for error-path tests)."""

    def __init__(self, message: str = "archive unavailable") -> None:
        super().__init__()
        self.message = message

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryItem]:
        """Yield one :class:`HistoryFailure`."""
        self.queries.append(query)
        yield HistoryFailure(self.message)


@dataclass(frozen=True, slots=True)
class SinkCall:
    """One :meth:`MemorySink.accept` call."""

    peer_id: bytes | None
    envelopes: tuple[Envelope, ...]
    received_at: float
    ephemeral: bool


class MemorySink:
    """Records accepted envelopes; :meth:`wait_for` blocks until enough have arrived."""

    def __init__(self) -> None:
        #: Every call, in order.
        self.calls: list[SinkCall] = []
        #: Every envelope, in order.
        self.envelopes: list[Envelope] = []
        self._changed = asyncio.Event()

    async def accept(
        self,
        peer_id: bytes | None,
        envelopes: Sequence[Envelope],
        received_at: float,
        *,
        ephemeral: bool = False,
    ) -> bool:
        """Record the call; always takes the envelopes."""
        self.calls.append(SinkCall(peer_id, tuple(envelopes), received_at, ephemeral))
        self.envelopes.extend(envelopes)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        return True

    async def wait_for(self, count: int, timeout: float = 5.0) -> list[Envelope]:
        """Wait until at least ``count`` envelopes arrived (TimeoutError after ``timeout`` s)."""
        async with asyncio.timeout(timeout):
            while len(self.envelopes) < count:
                await self._changed.wait()
        return self.envelopes
