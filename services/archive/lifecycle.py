"""The store's life in the service: opening (with retries), reachability for health, background loops.

:class:`StoreGate` is what the servicer asks for the store. Until the store has opened it raises
:class:`~services.archive.errors.ArchiveUnavailable`, so a service started while Cassandra is down answers
UNAVAILABLE (and reports NOT_SERVING) instead of crashing, and becomes ready by itself once the store opens.
:class:`Periodic` runs one background duty (opening, probing, recounting, purging) until stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from archivestore.errors import StoreError, StoreUnavailable
from archivestore.protocol import ArchiveStore
from meshcore.logging import trim
from services.archive.errors import ArchiveUnavailable

__all__ = ["PROBE_HASH", "Periodic", "StoreGate"]

_log = logging.getLogger(__name__)
#: The key a health probe looks up: a cheap point read that exercises the connection (never stored).
PROBE_HASH = bytes(32)

HealthSink = Callable[[bool], Awaitable[None]]


class StoreGate:
    """Hands out the store once it is open and tracks whether it is reachable.

    ``on_health(reachable)`` is awaited whenever reachability changes (and once on the first report); the
    server points it at the health servicer.
    """

    def __init__(self, store: ArchiveStore, on_health: HealthSink | None = None) -> None:
        self._store = store
        self._on_health = on_health
        self._open = False
        self._closed = False
        self._problem = "not opened yet"
        self._reachable: bool | None = None

    @property
    def backend(self) -> str:
        """The adapter's name (``sqlite`` / ``cassandra``)."""
        return self._store.backend

    @property
    def is_open(self) -> bool:
        """Whether the store has opened (and not been closed)."""
        return self._open

    @property
    def store(self) -> ArchiveStore:
        """The open store; ArchiveUnavailable while it has not opened."""
        if not self._open:
            raise ArchiveUnavailable(f"the {self.backend} store is not open ({self._problem})")
        return self._store

    async def report(self, reachable: bool) -> None:
        """Record the store's reachability; tells ``on_health`` about changes."""
        if reachable == self._reachable:
            return
        self._reachable = reachable
        if self._on_health is not None:
            await self._on_health(reachable)

    async def try_open(self) -> bool:
        """Open the store once. False (and a warning) while it is unreachable; other store errors raise."""
        if self._open or self._closed:
            return self._open
        try:
            await self._store.open()
        except StoreUnavailable as err:
            self._problem = trim(err, 300)
            _log.warning("archive store (%s) unreachable: %s", self.backend, self._problem)
            await self.report(False)
            return False
        self._open = True
        _log.info("archive store (%s) open", self.backend)
        await self.report(True)
        return True

    async def probe(self, now: int) -> None:
        """One cheap round trip; reports reachability (a point lookup of a key that is never stored)."""
        if not self._open:
            return
        try:
            await self._store.contains([PROBE_HASH], now=now)
        except StoreError as err:
            if self._reachable is not False:
                _log.warning("archive store (%s) probe failed: %s", self.backend, trim(err, 300))
            await self.report(False)
        else:
            await self.report(True)

    async def close(self) -> None:
        """Close the store (after the server has drained); later calls get UNAVAILABLE."""
        self._closed = True
        if self._open:
            self._open = False
            self._problem = "closed"
            await self._store.close()


class Periodic:
    """Runs ``duty()`` every ``interval_s`` seconds (first run at once) until :meth:`stop`.

    A failing run is logged and the loop goes on; ``duty`` returning True ends the loop (used by the
    opener once the store is open). ``backoff`` multiplies the interval after each run that returned
    False, up to ``max_interval_s``.
    """

    def __init__(
        self,
        name: str,
        interval_s: float,
        duty: Callable[[], Awaitable[bool | None]],
        *,
        backoff: float = 1.0,
        max_interval_s: float | None = None,
    ) -> None:
        self.name = name
        self._interval_s = interval_s
        self._duty = duty
        self._backoff = backoff
        self._max_interval_s = max_interval_s if max_interval_s is not None else interval_s
        self._task: asyncio.Task[None] | None = None
        self.runs = 0

    def start(self) -> None:
        """Start the loop on the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"archive-{self.name}")

    async def _run(self) -> None:
        interval = self._interval_s
        while True:
            began = time.monotonic()
            try:
                done = await self._duty()
            except Exception:
                _log.exception("background duty %s failed", self.name)
                done = False
            self.runs += 1
            if done:
                return
            if done is False:
                interval = min(interval * self._backoff, self._max_interval_s)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))

    async def stop(self) -> None:
        """Cancel the loop and wait until it has ended."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
