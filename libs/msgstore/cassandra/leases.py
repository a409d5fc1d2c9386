"""Leases on Cassandra: lightweight transactions (Paxos) at LOCAL_SERIAL, the only ones in the store.

``acquire`` reads the row at LOCAL_SERIAL and then either inserts it ``IF NOT EXISTS`` (epoch 1) or takes
it over ``IF epoch = <read> AND expires_at <= now`` with epoch + 1: of racing takers exactly one condition
holds, and a holder that renewed in between (expiry moved) makes the takeover fail. ``renew`` and
``release`` apply only ``IF owner = ? AND epoch = ?``. A timed-out transaction has an unknown outcome
(StoreUnavailable); the caller retries, and a holder asking again gets its own lease back.

Group membership is plain writes to ``members`` (one partition per group): a heartbeat rewrites the member's
row with a TTL a minute beyond its expiry, so a dead member's row leaves by itself; readers compare
``expires_at`` with their ``now`` (the TTL is only the clean-up).
"""

from __future__ import annotations

import math

from msgstore.cassandra.session import Cql
from msgstore.types import Lease, Member

__all__ = ["CassandraLeases"]

_READ = "SELECT owner, epoch, expires_at, ttl FROM {ks}.leases WHERE name = ?"
_CLEAN_UP_S = 60  # a member row outlives its expiry by this much before its TTL removes it


class CassandraLeases:
    """The :class:`~msgstore.protocol.LeaseStore` on Cassandra."""

    def __init__(self, cql: Cql) -> None:
        self._cql = cql

    async def acquire(self, name: str, owner: str, ttl: float, now: float) -> Lease | None:
        """Take ``name`` if free or expired (epoch + 1); None when someone else holds it."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        rows = await self._cql.rows(_READ, (name,), "read lease", serial=True)
        if not rows:
            applied = await self._cql.conditional(
                "INSERT INTO {ks}.leases (name, owner, epoch, expires_at, ttl) VALUES (?, ?, 1, ?, ?) "
                "IF NOT EXISTS",
                (name, owner, now + ttl, ttl),
                "acquire lease",
            )
            return Lease(name, owner, 1, now + ttl, ttl) if applied else None
        holder, epoch, expires_at, _ = rows[0]
        if expires_at > now:
            if holder != owner:
                return None
            return await self.renew(Lease(name, owner, epoch, expires_at, ttl), now)
        applied = await self._cql.conditional(
            "UPDATE {ks}.leases SET owner = ?, epoch = ?, expires_at = ?, ttl = ? WHERE name = ? "
            "IF epoch = ? AND expires_at <= ?",
            (owner, epoch + 1, now + ttl, ttl, name, epoch, now),
            "take over lease",
        )
        return Lease(name, owner, epoch + 1, now + ttl, ttl) if applied else None

    async def renew(self, lease: Lease, now: float) -> Lease | None:
        """Extend ``lease``; None when another holder took it since."""
        applied = await self._cql.conditional(
            "UPDATE {ks}.leases SET expires_at = ?, ttl = ? WHERE name = ? IF owner = ? AND epoch = ?",
            (now + lease.ttl, lease.ttl, lease.name, lease.owner, lease.epoch),
            "renew lease",
        )
        return Lease(lease.name, lease.owner, lease.epoch, now + lease.ttl, lease.ttl) if applied else None

    async def release(self, lease: Lease) -> None:
        """Free ``lease`` at once if it is still ours."""
        await self._cql.conditional(
            "UPDATE {ks}.leases SET expires_at = 0 WHERE name = ? IF owner = ? AND epoch = ?",
            (lease.name, lease.owner, lease.epoch),
            "release lease",
        )

    async def holder(self, name: str) -> Lease | None:
        """The latest holding of ``name``."""
        rows = await self._cql.rows(_READ, (name,), "read lease", serial=True)
        if not rows:
            return None
        owner, epoch, expires_at, ttl = rows[0]
        return Lease(name, owner, epoch, expires_at, ttl)

    async def heartbeat(self, group: str, member: str, address: str, ttl: float, now: float) -> None:
        """Rewrite ``member``'s row with expiry ``now + ttl``."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        await self._cql.execute(
            [
                (
                    "INSERT INTO {ks}.members (grp, member, address, expires_at) VALUES (?, ?, ?, ?) "
                    "USING TTL ?",
                    (group, member, address, now + ttl, math.ceil(ttl) + _CLEAN_UP_S),
                )
            ],
            "member heartbeat",
        )

    async def members(self, group: str, now: float) -> list[Member]:
        """Members of ``group`` whose expiry is after ``now`` (one partition)."""
        rows = await self._cql.rows(
            "SELECT member, address, expires_at FROM {ks}.members WHERE grp = ?", (group,), "read members"
        )
        return [Member(group, name, address, expires) for name, address, expires in rows if expires > now]

    async def leave(self, group: str, member: str) -> None:
        """Mark ``member`` expired (an update, not a delete: no tombstone; the TTL removes the row)."""
        await self._cql.execute(
            [
                (
                    "UPDATE {ks}.members USING TTL ? SET expires_at = 0 WHERE grp = ? AND member = ?",
                    (_CLEAN_UP_S, group, member),
                )
            ],
            "leave group",
        )
