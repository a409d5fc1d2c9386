"""Which outbox shards this replica owns: one msgstore lease ``outbox/<shard>`` each, about a fair share.

Every pass (:meth:`ShardOwnership.tick`) a replica heartbeats its member row in the group ``send``
(msgstore ``LeaseStore.heartbeat``: alive for one lease TTL, with its advertised gRPC address) and reads
the live members. With ``n`` members, the one of rank ``r`` (members by name) aims at ``shards // n`` shards,
plus one when ``r < shards % n``, so the targets add up to the shard count. It renews what it holds once a
third of the lifetime has passed, takes free or expired shards while it is below its target, and names
its surplus when above (:meth:`surplus`); the engine releases a surplus shard once no attempt of it is in
flight, and the replica that needs it takes it at its next pass. Each rank prefers its own block of
consecutive shards (the ranks' targets laid end to end), takes in that order and gives up the shards
farthest from it first, so who owns what stays put while membership does.

A dead replica stops heartbeating and renewing: its member row and its leases expire within one lease TTL,
the survivors' targets grow, and they take its shards over (docs/messaging-store.md "Leases": the epoch
fences a deposed owner's late writes). A stopping replica leaves the group and releases every shard at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from msgstore.errors import StoreUnavailable
from msgstore.protocol import MsgStore
from msgstore.sharding import lease_name
from msgstore.types import Lease, Member

__all__ = ["GROUP", "ShardOwnership", "fair_share"]

_log = logging.getLogger(__name__)
GROUP = "send"  #: the member group of the send replicas


def fair_share(shards: int, members: list[str], me: str) -> int:
    """How many shards ``me`` aims at among ``members`` (names; ``me`` counts even if missing)."""
    names = sorted({*members, me})
    rank, count = names.index(me), len(names)
    return shards // count + (1 if rank < shards % count else 0)


class ShardOwnership:
    """The leases of the outbox shards this replica holds, and its membership."""

    def __init__(
        self,
        store: MsgStore,
        shards: int,
        owner: str,
        ttl_s: float,
        clock: Callable[[], float],
        *,
        address: str = "",
    ) -> None:
        # The store, not its lease part: a Cassandra store has its parts only once it is open.
        self._store = store
        self._shards = shards
        self._owner = owner
        self._ttl = ttl_s
        self._clock = clock
        self._held: dict[int, Lease] = {}
        self._members: list[Member] = []
        self._member = True  # heartbeats go out until leave() or forget()
        #: The gRPC address other replicas reach this one at (Cancel/Resend forwarding).
        self.address = address

    @property
    def shards(self) -> int:
        """The outbox's shard count."""
        return self._shards

    @property
    def owner(self) -> str:
        """This replica's owner name in the leases (and its member name)."""
        return self._owner

    @property
    def held(self) -> tuple[int, ...]:
        """The shards held now, ascending."""
        return tuple(sorted(self._held))

    @property
    def members(self) -> list[Member]:
        """The live members seen at the last pass (this replica included once it heartbeat)."""
        return list(self._members)

    @property
    def target(self) -> int:
        """The shards this replica aims at with the members seen at the last pass."""
        return fair_share(self._shards, [m.name for m in self._members], self._owner)

    def lease(self, shard: int) -> Lease | None:
        """The lease of ``shard`` if this replica holds it."""
        return self._held.get(shard)

    def drop(self, shard: int) -> Lease | None:
        """Forget ``shard`` (a write found its lease lost, or it is handed over); its lease, if held."""
        return self._held.pop(shard, None)

    def _preference(self) -> list[int]:
        """Every shard, this replica's preferred ones first (see the module docstring)."""
        names = sorted({*(m.name for m in self._members), self._owner})
        rank, count = names.index(self._owner), len(names)
        start = rank * (self._shards // count) + min(rank, self._shards % count)  # the ranks' blocks in turn
        return [(start + i) % self._shards for i in range(self._shards)]

    def surplus(self) -> list[int]:
        """Held shards beyond the target, the least preferred first."""
        excess = len(self._held) - self.target
        if excess <= 0:
            return []
        rank = {shard: i for i, shard in enumerate(self._preference())}
        return sorted(self._held, key=lambda s: rank[s], reverse=True)[:excess]

    async def tick(self) -> tuple[list[int], list[int]]:
        """Heartbeat and read the members, renew what is held (once a third of its TTL has passed), take
        free shards up to the target; (gained, lost)."""
        await self._see_members()
        lost = await self._renew()
        gained: list[int] = []
        target = self.target
        for shard in self._preference():
            if len(self._held) >= target:
                break
            if shard in self._held:
                continue
            try:
                taken = await self._store.leases.acquire(
                    lease_name(shard), self._owner, self._ttl, self._clock()
                )
            except StoreUnavailable as err:
                _log.warning("outbox lease %s: store unavailable: %s", lease_name(shard), err)
                break  # the next pass tries again
            if taken is not None:
                self._held[shard] = taken
                gained.append(shard)
        return gained, lost

    async def _see_members(self) -> None:
        if not self._member:
            return
        now = self._clock()
        try:
            await self._store.leases.heartbeat(GROUP, self._owner, self.address, self._ttl, now)
            self._members = await self._store.leases.members(GROUP, now)
        except StoreUnavailable as err:  # the last view stands; leases decide who writes anyway
            _log.warning("send membership: store unavailable: %s", err)

    async def _renew(self) -> list[int]:
        lost: list[int] = []
        for shard, lease in list(self._held.items()):
            now = self._clock()
            if lease.expires_at - now > self._ttl * 2 / 3:
                continue
            try:
                renewed = await self._store.leases.renew(lease, now)
            except StoreUnavailable as err:
                # The next pass retries; a lease that expires meanwhile is lost by the next renew.
                _log.warning("outbox lease %s: store unavailable: %s", lease.name, err)
                continue
            if renewed is None:
                lost.append(shard)
                del self._held[shard]
            else:
                self._held[shard] = renewed
        return lost

    async def release(self, lease: Lease) -> None:
        """Give one lease up at once (a surplus shard handed over; already dropped from ``held``)."""
        try:
            await self._store.leases.release(lease)
        except StoreUnavailable as err:
            _log.warning("releasing %s: %s (it expires on its own)", lease.name, err)

    async def release_all(self) -> None:
        """Leave the group and give every held shard up at once (graceful stop: the others take over
        without waiting for the leases to expire)."""
        held, self._held = list(self._held.values()), {}
        if self._member:
            self._member = False
            try:
                await self._store.leases.leave(GROUP, self._owner)
            except StoreUnavailable as err:
                _log.warning("leaving the send group: %s (the membership expires on its own)", err)
        for lease in held:
            await self.release(lease)

    def forget(self) -> None:
        """Drop every lease and the membership from memory without telling the store: what a crash leaves
        behind (the leases and the member row expire on their own)."""
        self._held.clear()
        self._member = False
