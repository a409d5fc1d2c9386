"""Leases on Cassandra: lightweight transactions (Paxos) at LOCAL_SERIAL, the only ones in the store.

``acquire`` reads the row at LOCAL_SERIAL and then either inserts it ``IF NOT EXISTS`` (epoch 1) or takes
it over ``IF epoch = <read> AND expires_at <= now`` with epoch + 1: of racing takers exactly one condition
holds, and a holder that renewed in between (expiry moved) makes the takeover fail. ``renew`` and
``release`` apply only ``IF owner = ? AND epoch = ?``. A timed-out transaction has an unknown outcome
(StoreUnavailable); the caller retries, and a holder asking again gets its own lease back.
"""

from __future__ import annotations

from msgstore.cassandra.session import Cql
from msgstore.types import Lease

__all__ = ["CassandraLeases"]

_READ = "SELECT owner, epoch, expires_at, ttl FROM {ks}.leases WHERE name = ?"


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
