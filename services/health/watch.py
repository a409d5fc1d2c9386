"""WatchHealth's fan-out: every watcher gets the current report, then every status change in order.

MESSAGING-API "Health Indicator" requires ``health:change`` "immediately after the state transition occurs",
so a status change is queued to every watcher in the same step that computes it, never coalesced and never
held back by a rate limit. Watchers of any change (WATCH_MODE_ANY) also get reports whose status is unchanged,
at most one per ``min_interval_s``: the decision is taken when an evaluation is published, on the evaluation's
clock, so the rate limit needs no timer of its own (the poll interval bounds the extra delay) and tests drive
it without sleeping. An unread backlog is bounded: unchanged-status reports replace each other, and a watcher
that lets :data:`MAX_BACKLOG` reports pile up is ended with RESOURCE_EXHAUSTED rather than holding memory.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from meshcore.errors import ResourceExhausted, Unavailable
from services.health.hysteresis import Transition
from services.health.logic import HealthReport, HealthStatus

__all__ = ["MAX_BACKLOG", "WatchHub", "WatchStream", "WatchUpdate"]

#: Reports a watcher may leave unread before it is ended (health.proto WatchHealthResponse).
MAX_BACKLOG = 1024


@dataclass(frozen=True)
class WatchUpdate:
    """One WatchHealth message: the report, the status before it (None in the first), whether it changed."""

    report: HealthReport
    previous: HealthStatus | None
    status_changed: bool


@dataclass(eq=False)
class _Watcher:
    any_change: bool
    backlog: deque[WatchUpdate] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    last_sent: HealthReport | None = None
    last_sent_at: float = 0.0
    overflowed: bool = False

    def push(self, update: WatchUpdate, now: float) -> None:
        last = self.backlog[-1] if self.backlog else None
        if not update.status_changed and last is not None and not last.status_changed and last.previous:
            self.backlog[-1] = update  # a newer report stands for the unread one (never for the first)
        elif len(self.backlog) >= MAX_BACKLOG:
            self.overflowed = True
        else:
            self.backlog.append(update)
        self.last_sent, self.last_sent_at = update.report, now
        self.wakeup.set()


class WatchHub:
    """Delivers published reports to the open watch streams."""

    def __init__(self, *, min_interval_s: float = 1.0) -> None:
        self._min_interval_s = min_interval_s
        self._watchers: set[_Watcher] = set()
        self._latest: HealthReport | None = None
        self._latest_at = 0.0
        self._closed = False

    @property
    def watchers(self) -> int:
        """Open watch streams."""
        return len(self._watchers)

    def publish(self, report: HealthReport, transition: Transition | None, now: float) -> None:
        """Hand one evaluation's report (and the status change it caused, if any) to every watcher."""
        self._latest, self._latest_at = report, now
        for w in self._watchers:
            if w.last_sent is None:
                w.push(WatchUpdate(report, None, False), now)
            elif transition is not None and transition.previous is not None:
                w.push(WatchUpdate(report, transition.previous, True), now)
            elif (
                w.any_change
                and now - w.last_sent_at >= self._min_interval_s
                and report.fingerprint() != w.last_sent.fingerprint()
            ):
                w.push(WatchUpdate(report, report.status, False), now)

    def watch(self, *, any_change: bool) -> WatchStream:
        """The current report (once there is one), then updates as :meth:`publish` queues them.

        The watcher is registered by this call, not when the stream is first read, so nothing published in
        between is missed; :meth:`WatchStream.close` unregisters it.
        """
        watcher = _Watcher(any_change)
        if not self._closed:
            if self._latest is not None:
                watcher.push(WatchUpdate(self._latest, None, False), self._latest_at)
            self._watchers.add(watcher)
        return WatchStream(self, watcher)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def discard(self, watcher: _Watcher) -> None:
        """Stop delivering to ``watcher`` (its stream closed)."""
        self._watchers.discard(watcher)

    def close(self) -> None:
        """End every watch stream (graceful shutdown: they would otherwise hold the server for its grace)."""
        self._closed = True
        for w in self._watchers:
            w.wakeup.set()


class WatchStream:
    """One watcher's updates, read with ``async for``; close it when done (the servicer does, in ``finally``).

    Ends with :class:`~meshcore.errors.Unavailable` when the hub closes (the service is stopping) and with
    :class:`~meshcore.errors.ResourceExhausted` when the reader fell :data:`MAX_BACKLOG` behind; in both cases
    after the updates still queued.
    """

    def __init__(self, hub: WatchHub, watcher: _Watcher) -> None:
        self._hub = hub
        self._watcher = watcher

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> WatchUpdate:
        w = self._watcher
        while not w.backlog:
            if w.overflowed:
                self.close()
                raise ResourceExhausted(
                    f"WatchHealth: over {MAX_BACKLOG} reports unread; reconnect for the current report"
                )
            if self._hub.closed:
                self.close()
                raise Unavailable("the health service is shutting down")
            w.wakeup.clear()
            await w.wakeup.wait()
        return w.backlog.popleft()

    def close(self) -> None:
        """Unregister from the hub (idempotent)."""
        self._hub.discard(self._watcher)
