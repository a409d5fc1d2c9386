"""One :class:`~.followers.ServedFollower` per history-query instance, as the instances come and go.

Each history-query instance serves its own queries and has its own ``WatchServed`` feed, so the records
writer follows every one of them (MESSAGING-API "Acknowledgements": envelopes served by the History API
become stored). In Kubernetes the instances are the pods behind a headless Service:
``SUBSCRIPTION_HISTORY_ADDR=dns:///history-query-headless.<ns>.svc:50054`` resolves to each ready pod
(:mod:`meshcore.discovery`), re-resolved every ``SUBSCRIPTION_DISCOVERY_INTERVAL_SECONDS``. A new address
gets a follower, which loads its position (none for a new pod: it replays what that instance still holds);
a follower whose address is gone is cancelled and its channel closed. A follower whose stream ended while
its address stays — a restart at the same address — reconnects by itself (``ServedFollower.run``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from meshcore.discovery import Instances
from services.subscription.followers import Missed, ServedFollower
from services.subscription.inputs import RecordInputs
from services.subscription.ports import ServedFeedPort

__all__ = ["ServedDiscovery", "ServedFollowers"]


async def _keep(address: str) -> None:
    """Nothing to close (a feed the caller owns)."""


@dataclass(frozen=True)
class ServedDiscovery:
    """Where the history-query instances are and how to reach one."""

    instances: Instances
    """The configured targets and the addresses they resolve to."""
    open: Callable[[str], ServedFeedPort]
    """The WatchServed feed of the instance at an address."""
    close: Callable[[str], Awaitable[None]] = _keep
    """Release what :attr:`open` took for an address that is gone (its channel)."""

    @classmethod
    def fixed(cls, feeds: Sequence[ServedFeedPort]) -> ServedDiscovery:
        """These feeds and no others (tests, and targets that are never resolved)."""
        by_target = {feed.target: feed for feed in feeds}
        return cls(Instances(list(by_target)), by_target.__getitem__)


class ServedFollowers:
    """Runs a served follower per instance the discovery knows, while this replica is the writer."""

    def __init__(self, discovery: ServedDiscovery, inputs: RecordInputs, missed: Missed) -> None:
        self._discovery = discovery
        self._inputs = inputs
        self._missed = missed
        self.followers: dict[str, ServedFollower] = {}
        """The running followers by address (tests, logs)."""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._opened: set[str] = set()  # addresses whose feed was opened, running or not

    @property
    def instances(self) -> Instances:
        """The discovery's instances (tests refresh them by hand)."""
        return self._discovery.instances

    async def run(self) -> None:
        """Follow every instance, re-resolving the names, until cancelled."""
        instances = self._discovery.instances
        instances.listeners.append(self._changed)
        try:
            await instances.start()  # resolved first: no follower is started for an address already gone
            await self._changed(instances.current)
            await asyncio.Event().wait()  # the followers and the discovery work in their own tasks
        finally:
            instances.listeners.remove(self._changed)
            await instances.stop()
            for address in list(self._tasks):
                await self._end(address)  # their channels stay open for the next term as the writer

    async def _changed(self, current: Mapping[str, Sequence[str]]) -> None:
        wanted = dict.fromkeys(a for addresses in current.values() for a in addresses)
        for address in [a for a in self._tasks if a not in wanted]:
            await self._end(address)
        for address in [a for a in self._opened if a not in wanted]:  # gone while this was not the writer
            self._opened.discard(address)
            await self._discovery.close(address)
        for address in wanted:
            if address not in self._tasks:
                self._opened.add(address)
                follower = ServedFollower(self._discovery.open(address), self._inputs, missed=self._missed)
                self.followers[address] = follower
                self._tasks[address] = asyncio.create_task(follower.run(), name=f"served {address}")

    async def _end(self, address: str) -> None:
        task = self._tasks.pop(address)
        self.followers.pop(address, None)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
