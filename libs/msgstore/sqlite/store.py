"""The SQLite messaging store: the shared connection layer, open/close, and expiry of aged rows.

Connections come from :class:`dbkit.sqlite.bridge.SqliteBridge` (one writer thread, pooled readers,
bounded write queue; nothing sqlite3 runs on the event loop; threads ``msgstore-sqlite-*``) and the schema
from :func:`dbkit.sqlite.migrations.migrate`; their :mod:`dbkit.errors` are translated here into
:mod:`msgstore.errors`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from dbkit.errors import DbError
from dbkit.sqlite.bridge import SqliteBridge
from dbkit.sqlite.migrations import in_transaction, migrate
from msgstore.errors import StoreUnavailable
from msgstore.settings import StoreSettings
from msgstore.sqlite.leases import SqliteLeases
from msgstore.sqlite.outbox import SqliteOutbox
from msgstore.sqlite.records import SqliteRecords
from msgstore.sqlite.schema import MIGRATIONS, translate

__all__ = ["CHECKPOINT_EVERY_S", "SqliteMsgStore"]

CHECKPOINT_EVERY_S = 0.05
"""How often the WAL is checkpointed in the background (dbkit.sqlite.checkpointer). Small pieces often: at
1,000 Sends/s the log grows ~11,000 pages a second, and a checkpoint every 0.25 s still stalled the commits
beside it (p99 44 ms), every 0.05 s not (p99 14 ms; docs/benchmarks.md). With nothing new to copy a PASSIVE
checkpoint only reads the WAL index."""

T = TypeVar("T")

#: Tables whose rows carry ``expires_at`` (NULL = forever) and are purged by :meth:`SqliteMsgStore.maintain`.
_EXPIRING = ("outbox", "payloads", "records", "records_by_subscription", "subscriptions", "members")


class SqliteMsgStore:
    """Leases, outbox and records in one SQLite file (WAL), shared by every process that opens it."""

    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        settings: StoreSettings,
        *,
        busy_timeout_ms: int = 5000,
        read_connections: int = 2,
        max_pending_writes: int = 256,
    ) -> None:
        self.path = os.fspath(path)
        self.settings = settings
        self._busy_timeout_ms = busy_timeout_ms
        self._read_connections = read_connections
        self._max_pending_writes = max_pending_writes
        self._bridge: SqliteBridge | None = None
        self._leases = SqliteLeases(self)
        self._outbox = SqliteOutbox(self)
        self._records = SqliteRecords(self)

    @property
    def leases(self) -> SqliteLeases:
        """The leases."""
        return self._leases

    @property
    def outbox(self) -> SqliteOutbox:
        """The outbox."""
        return self._outbox

    @property
    def records(self) -> SqliteRecords:
        """Records, subscriptions and events."""
        return self._records

    async def open(self) -> None:
        """Connect and migrate (idempotent)."""
        if self._bridge is not None:
            return
        bridge = SqliteBridge(
            self.path,
            name="msgstore",
            read_connections=self._read_connections,
            max_pending_writes=self._max_pending_writes,
            busy_timeout_ms=self._busy_timeout_ms,
            page_size=None,
            cache_mib=64,
            # Checkpoints off the commit path: one inside a commit stalled every Send behind it 20–40 ms
            # every ~350 ms at 1,000 Sends/s (dbkit.sqlite.checkpointer).
            checkpoint_every_s=CHECKPOINT_EVERY_S,
        )
        try:
            await bridge.open(lambda conn: migrate(conn, MIGRATIONS, now=int(time.time())))
        except DbError as err:
            raise translate(err, "open") from err
        self._bridge = bridge

    async def close(self) -> None:
        """Finish queued writes and close every connection."""
        bridge, self._bridge = self._bridge, None
        if bridge is not None:
            await bridge.close()

    def _open_bridge(self, doing: str) -> SqliteBridge:
        if self._bridge is None:
            raise StoreUnavailable(f"messaging store is not open ({doing})")
        return self._bridge

    async def write(self, job: Callable[[sqlite3.Connection], T], doing: str) -> T:
        """Run ``job`` on the writer connection (the caller opens its own transaction)."""
        try:
            return await self._open_bridge(doing).write(job, doing)
        except DbError as err:
            raise translate(err, doing) from err

    async def read(self, job: Callable[[sqlite3.Connection], T], doing: str) -> T:
        """Run ``job`` on a read connection."""
        try:
            return await self._open_bridge(doing).read(job, doing)
        except DbError as err:
            raise translate(err, doing) from err

    async def maintain(self, *, now: float) -> int:
        """Delete rows past ``expires_at``, events past the retention window and changes past theirs."""
        settings = self.settings

        def job(conn: sqlite3.Connection) -> int:
            def body() -> int:
                removed = 0
                for table in _EXPIRING:
                    removed += conn.execute(
                        f"DELETE FROM {table} WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
                    ).rowcount
                removed += conn.execute(
                    "DELETE FROM events WHERE emitted_at <= ?", (now - settings.event_retention,)
                ).rowcount
                removed += conn.execute(
                    "DELETE FROM outbox_changes WHERE changed_at <= ?", (now - settings.change_retention,)
                ).rowcount
                return removed

            return in_transaction(conn, body)

        return await self.write(job, "expire rows")
