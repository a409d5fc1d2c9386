"""Group commit: concurrent store writes flushed together, each caller answered once its batch committed.

The Send path and the engine write the outbox a few times per request. One write transaction per call made
the single SQLite writer the limit (each commit, thread hop and loop wake-up paid per request); here every
call waiting while a flush runs goes into the next flush, so under load one transaction carries many
requests, and an idle service flushes a lone call at once (no timer, no added latency). A caller's future
resolves only after the flush holding its item returned, so what a caller was told is durable is
(MESSAGING-API "send": the RequestID is the handle to a persisted request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    """Flushes submitted items with ``flush(items) -> one result or exception per item``, one flush at a
    time, at most ``max_batch`` items each and, when ``size`` is given, items of at most ``max_size`` in
    total (an item larger than that alone still goes, by itself)."""

    def __init__(
        self,
        flush: Callable[[Sequence[T]], Awaitable[Sequence[R | BaseException]]],
        *,
        max_batch: int = 256,
        size: Callable[[T], int] | None = None,
        max_size: int = 0,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._flush = flush
        self._max_batch = max_batch
        self._size = size
        self._max_size = max_size
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._running: asyncio.Task[None] | None = None
        #: Flushes run and items flushed (for tests and the curious).
        self.flushes = 0
        self.items = 0

    async def submit(self, item: T) -> R:
        """The item's result once the flush holding it returned; its exception if it had one."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._running is None:
            self._running = asyncio.create_task(self._drain())
        return await future

    async def submit_all(self, items: Sequence[T]) -> list[R | BaseException]:
        """Several items in one flush (when they fit), in order; each outcome, exceptions included."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[R]] = [loop.create_future() for _ in items]
        self._pending.extend(zip(items, futures, strict=True))
        if self._running is None:
            self._running = asyncio.create_task(self._drain())
        return list(await asyncio.gather(*futures, return_exceptions=True))

    async def _drain(self) -> None:
        try:
            while self._pending:
                count = self._take()
                batch = self._pending[:count]
                del self._pending[:count]
                await self._run(batch)
        finally:
            self._running = None

    def _take(self) -> int:
        """How many pending items the next flush takes."""
        count = min(len(self._pending), self._max_batch)
        if self._size is None:
            return count
        total = 0
        for index, (item, _) in enumerate(self._pending[:count]):
            total += self._size(item)
            if total > self._max_size and index > 0:
                return index
        return count

    async def _run(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        self.flushes += 1
        self.items += len(batch)
        try:
            results = await self._flush([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"flush returned {len(results)} results for {len(batch)} items")
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as err:  # the whole flush failed: every caller in it gets the error
            for _, future in batch:
                if not future.done():
                    future.set_exception(err)
            return
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():  # the caller went away (cancelled); its item was flushed all the same
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
