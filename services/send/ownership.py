"""Which outbox shards this replica owns: one msgstore lease ``outbox/<shard>`` each.

A replica takes every shard whose lease is free or expired and renews the ones it holds once a third of
their lifetime has passed, so a live owner keeps its shards and a dead one's are taken over within one
lease TTL (docs/messaging-store.md, "Leases": the epoch fences a deposed owner's late writes). The first
replica to start therefore owns every shard; a second stands by and takes over what the first stops
renewing (spreading shards over live replicas is a later refinement).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from msgstore.errors import StoreUnavailable
from msgstore.protocol import MsgStore
from msgstore.sharding import lease_name
from msgstore.types import Lease

__all__ = ["ShardOwnership"]

_log = logging.getLogger(__name__)


class ShardOwnership:
    """The leases of the outbox shards this replica holds."""

    def __init__(
        self, store: MsgStore, shards: int, owner: str, ttl_s: float, clock: Callable[[], float]
    ) -> None:
        # The store, not its lease part: a Cassandra store has its parts only once it is open.
        self._store = store
        self._shards = shards
        self._owner = owner
        self._ttl = ttl_s
        self._clock = clock
        self._held: dict[int, Lease] = {}

    @property
    def shards(self) -> int:
        """The outbox's shard count."""
        return self._shards

    @property
    def owner(self) -> str:
        """This replica's owner name in the leases."""
        return self._owner

    @property
    def held(self) -> tuple[int, ...]:
        """The shards held now, ascending."""
        return tuple(sorted(self._held))

    def lease(self, shard: int) -> Lease | None:
        """The lease of ``shard`` if this replica holds it."""
        return self._held.get(shard)

    def drop(self, shard: int) -> None:
        """Forget ``shard`` (a write found its lease lost)."""
        self._held.pop(shard, None)

    async def tick(self) -> tuple[list[int], list[int]]:
        """Renew what is held (when a third of its TTL has passed), take what is free; (gained, lost)."""
        gained: list[int] = []
        lost: list[int] = []
        for shard in range(self._shards):
            now = self._clock()
            lease = self._held.get(shard)
            try:
                if lease is not None:
                    if lease.expires_at - now > self._ttl * 2 / 3:
                        continue
                    renewed = await self._store.leases.renew(lease, now)
                    if renewed is None:
                        lost.append(shard)
                        del self._held[shard]
                    else:
                        self._held[shard] = renewed
                    continue
                taken = await self._store.leases.acquire(lease_name(shard), self._owner, self._ttl, now)
            except StoreUnavailable as err:
                # The next tick retries; a lease that expires meanwhile is lost by the next renew.
                _log.warning("outbox lease %s: store unavailable: %s", lease_name(shard), err)
                continue
            if taken is not None:
                self._held[shard] = taken
                gained.append(shard)
        return gained, lost

    async def release_all(self) -> None:
        """Give every held shard up at once (graceful stop: another replica takes over without waiting)."""
        held, self._held = list(self._held.values()), {}
        for lease in held:
            try:
                await self._store.leases.release(lease)
            except StoreUnavailable as err:
                _log.warning("releasing %s: %s (it expires on its own)", lease.name, err)
