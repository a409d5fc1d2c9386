"""The bidirectional Ingest stream's flow control, without gRPC: read, handle concurrently, answer, stop.

:func:`pump` reads requests while fewer than ``window`` are unanswered (then stops reading, so HTTP/2 flow
control pushes back on the client), handles each in its own task, and yields each answer as soon as it is
ready — out of order, which the protocol allows (acks carry the batch id). The first handler error ends the
pump (the other handlers are cancelled; their answers were never sent, so the client re-sends them). When
``stop`` is set (graceful shutdown) it stops reading, yields the answers still owed, then raises
:class:`~services.ingest.model.ShuttingDown` so the client reconnects and re-sends what it had not yet had
acknowledged.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from services.ingest.model import ShuttingDown

__all__ = ["pump"]

Q = TypeVar("Q")
R = TypeVar("R")


class _End:
    """The request stream ended (the client half-closed)."""


_END = _End()


async def _next(iterator: AsyncIterator[Q]) -> Q | _End:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return _END


async def pump(
    requests: AsyncIterator[Q],
    handle: Callable[[Q], Awaitable[R]],
    *,
    window: int,
    stop: asyncio.Event,
) -> AsyncGenerator[R, None]:
    """Yield ``handle(request)`` per request, concurrently, at most ``window`` unanswered (see module)."""
    if window < 1:
        raise ValueError("window must be >= 1")
    loop = asyncio.get_running_loop()
    read: asyncio.Task[Q | _End] | None = None
    stopping = loop.create_task(stop.wait())
    handlers: set[asyncio.Task[R]] = set()
    reading = True
    interrupted = False
    try:
        while True:
            if reading and stop.is_set():
                reading, interrupted = False, True
                if read is not None:
                    read.cancel()
                    read = None
            if reading and read is None and len(handlers) < window:
                read = loop.create_task(_next(requests))
            waitables: set[asyncio.Future[Any]] = set(handlers)
            if read is not None:
                waitables.update((read, stopping))
            if not waitables:
                break
            done, _ = await asyncio.wait(waitables, return_when=asyncio.FIRST_COMPLETED)
            if read is not None and read in done:
                request, read = read.result(), None
                if isinstance(request, _End):
                    reading = False  # the client half-closed: answer what is outstanding, then end
                else:
                    handlers.add(loop.create_task(_call(handle, request)))
            for task in done:
                if task in handlers:
                    handlers.discard(task)
                    yield task.result()  # a handler's error ends the stream here
        if interrupted:
            raise ShuttingDown("ingest is shutting down; re-send unacknowledged batches elsewhere")
    finally:
        tasks: list[asyncio.Future[Any]] = [t for t in (read, stopping, *handlers) if t is not None]
        for task in tasks:
            task.cancel()
        # Handlers still running are cancelled: their batches were never acknowledged. (Items they queued in
        # the batcher are written anyway, harmlessly: writes are idempotent.)
        await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled():
                task.exception()  # retrieved: a second failure is not worth a "never retrieved" log


async def _call(handle: Callable[[Q], Awaitable[R]], request: Q) -> R:
    return await handle(request)
