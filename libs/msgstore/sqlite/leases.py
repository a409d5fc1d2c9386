"""Leases on SQLite: each operation is one ``BEGIN IMMEDIATE`` transaction, so of racing callers (threads
or processes sharing the file) exactly one sees the lease free and takes it. Group membership
(heartbeats) lives in ``members``: one row per member, its expiry moved by each heartbeat."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from dbkit.sqlite.migrations import in_transaction
from msgstore.types import Lease, Member

if TYPE_CHECKING:
    from msgstore.sqlite.store import SqliteMsgStore

__all__ = ["SqliteLeases", "lease_is_current"]


def lease_is_current(conn: sqlite3.Connection, lease: Lease) -> bool:
    """Whether ``lease`` is still the latest holding of its name (fencing check inside a transaction)."""
    row = conn.execute("SELECT owner, epoch FROM leases WHERE name = ?", (lease.name,)).fetchone()
    return row is not None and row[0] == lease.owner and row[1] == lease.epoch


class SqliteLeases:
    """The :class:`~msgstore.protocol.LeaseStore` of a :class:`SqliteMsgStore`."""

    def __init__(self, store: SqliteMsgStore) -> None:
        self._store = store

    async def acquire(self, name: str, owner: str, ttl: float, now: float) -> Lease | None:
        """Take ``name`` if free or expired (epoch + 1); None when held."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")

        def job(conn: sqlite3.Connection) -> Lease | None:
            def body() -> Lease | None:
                row = conn.execute(
                    "SELECT epoch, expires_at, owner FROM leases WHERE name = ?", (name,)
                ).fetchone()
                if row is not None and row[1] > now and row[2] != owner:
                    return None
                # Held by the caller itself (a retry after an ambiguous outcome): renewed, same epoch.
                mine = row is not None and row[1] > now
                lease = Lease(name, owner, (row[0] if row else 0) + (0 if mine else 1), now + ttl, ttl)
                conn.execute(
                    "INSERT INTO leases (name, owner, epoch, expires_at, ttl) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch, "
                    "expires_at = excluded.expires_at, ttl = excluded.ttl",
                    (name, owner, lease.epoch, lease.expires_at, ttl),
                )
                return lease

            return in_transaction(conn, body)

        return await self._store.write(job, "acquire lease")

    async def renew(self, lease: Lease, now: float) -> Lease | None:
        """Extend ``lease``; None when another holder took it since."""

        def job(conn: sqlite3.Connection) -> Lease | None:
            def body() -> Lease | None:
                if not lease_is_current(conn, lease):
                    return None
                renewed = Lease(lease.name, lease.owner, lease.epoch, now + lease.ttl, lease.ttl)
                conn.execute(
                    "UPDATE leases SET expires_at = ? WHERE name = ?", (renewed.expires_at, lease.name)
                )
                return renewed

            return in_transaction(conn, body)

        return await self._store.write(job, "renew lease")

    async def release(self, lease: Lease) -> None:
        """Free ``lease`` at once (expiry 0) if it is still ours."""
        await self._store.write(
            self._update(
                "UPDATE leases SET expires_at = 0 WHERE name = ? AND owner = ? AND epoch = ?", lease
            ),
            "release lease",
        )

    @staticmethod
    def _update(sql: str, lease: Lease) -> Callable[[sqlite3.Connection], None]:
        def job(conn: sqlite3.Connection) -> None:
            in_transaction(conn, lambda: conn.execute(sql, (lease.name, lease.owner, lease.epoch)))

        return job

    async def holder(self, name: str) -> Lease | None:
        """The latest holding of ``name``."""

        def job(conn: sqlite3.Connection) -> Lease | None:
            row = conn.execute(
                "SELECT owner, epoch, expires_at, ttl FROM leases WHERE name = ?", (name,)
            ).fetchone()
            return None if row is None else Lease(name, row[0], row[1], row[2], row[3])

        return await self._store.read(job, "read lease")

    async def heartbeat(self, group: str, member: str, address: str, ttl: float, now: float) -> None:
        """Upsert ``member``'s row with expiry ``now + ttl``."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")

        def job(conn: sqlite3.Connection) -> None:
            in_transaction(
                conn,
                lambda: conn.execute(
                    "INSERT INTO members (grp, member, address, expires_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (grp, member) DO UPDATE SET address = excluded.address, "
                    "expires_at = excluded.expires_at",
                    (group, member, address, now + ttl),
                ),
            )

        await self._store.write(job, "member heartbeat")

    async def members(self, group: str, now: float) -> list[Member]:
        """Members of ``group`` whose expiry is after ``now``."""

        def job(conn: sqlite3.Connection) -> list[Member]:
            rows = conn.execute(
                "SELECT member, address, expires_at FROM members WHERE grp = ? AND expires_at > ? "
                "ORDER BY member",
                (group, now),
            )
            return [Member(group, name, address, expires) for name, address, expires in rows]

        return await self._store.read(job, "read members")

    async def leave(self, group: str, member: str) -> None:
        """Delete ``member``'s row."""

        def job(conn: sqlite3.Connection) -> None:
            in_transaction(
                conn,
                lambda: conn.execute("DELETE FROM members WHERE grp = ? AND member = ?", (group, member)),
            )

        await self._store.write(job, "leave group")
