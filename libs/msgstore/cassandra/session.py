"""Statements for the messaging tables over the shared cassandra-driver ⇄ asyncio bridge.

:class:`dbkit.cassandra.bridge.Bridge` bounds requests in flight and resolves driver callbacks on the event
loop (the archive uses the same one); its :mod:`dbkit.errors` become :mod:`msgstore.errors` here.
Statements are prepared on first use and cached by their text (``{ks}`` is the keyspace).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import Session
from cassandra.query import BatchStatement, BatchType, PreparedStatement

from dbkit.cassandra.bridge import Bridge, group_by_replicas, replica_set
from dbkit.errors import DbError, DbUnavailable
from msgstore.errors import MsgStoreError, StoreUnavailable

__all__ = ["PER_BATCH", "Cql", "translate"]

Params = Sequence[Any]
#: Partitions per UNLOGGED batch: Cassandra's ``unlogged_batch_across_partitions_warn_threshold`` (10).
PER_BATCH = 10


def translate(err: DbError, what: str) -> MsgStoreError:
    """The msgstore error for a bridge error (retryable ones stay retryable)."""
    if isinstance(err, DbUnavailable):
        return StoreUnavailable(f"messaging store {what}: {err}")
    return MsgStoreError(f"messaging store {what}: {err}")


class Cql:
    """Prepared statements of one keyspace, run through a :class:`Bridge`."""

    def __init__(self, session: Session, keyspace: str, max_in_flight: int) -> None:
        self.session = session
        self.keyspace = keyspace
        self.bridge = Bridge(session, max_in_flight)
        self._prepared: dict[str, PreparedStatement] = {}
        self._lock = asyncio.Lock()

    async def prepare(self, cql: str, *, serial: bool = False) -> PreparedStatement:
        """``cql`` prepared once (a blocking driver call, run off the event loop).

        ``serial``: a read at LOCAL_SERIAL, which completes any lightweight transaction in progress on the
        row before answering (leases read their current state this way).
        """
        key = ("S:" if serial else "") + cql
        stmt = self._prepared.get(key)
        if stmt is None:
            async with self._lock:
                stmt = self._prepared.get(key)
                if stmt is None:
                    text = cql.replace("{ks}", self.keyspace)
                    try:
                        prepared: PreparedStatement = await asyncio.to_thread(self.session.prepare, text)
                    except Exception as err:
                        raise StoreUnavailable(f"cannot prepare {text!r}: {err}") from err
                    # Conditional statements (leases) decide at LOCAL_SERIAL: one data centre's quorum.
                    prepared.serial_consistency_level = ConsistencyLevel.LOCAL_SERIAL
                    if serial:
                        prepared.consistency_level = ConsistencyLevel.LOCAL_SERIAL
                    self._prepared[key] = stmt = prepared
        return stmt

    async def rows(self, cql: str, params: Params, what: str, *, serial: bool = False) -> list[Any]:
        """Every row of a read."""
        stmt = await self.prepare(cql, serial=serial)
        try:
            return await self.bridge.fetch_all(stmt, params, what=what)
        except DbError as err:
            raise translate(err, what) from err

    async def execute(self, statements: Sequence[tuple[str, Params]], what: str) -> None:
        """Run writes concurrently; returns once all are acknowledged."""
        bound = [(await self.prepare(cql)).bind(p) for cql, p in statements]
        try:
            await self.bridge.execute_all(bound, what=what)
        except DbError as err:
            raise translate(err, what) from err

    async def logged(self, statements: Sequence[tuple[str, Params]], what: str) -> None:
        """Apply writes to several partitions atomically: all or none, eventually (a LOGGED batch)."""
        await self.logged_many([statements], what)

    async def execute_grouped(self, statements: Sequence[tuple[str, Params]], what: str) -> None:
        """Run single-row writes of distinct partitions concurrently, packed into UNLOGGED batches of at most
        :data:`PER_BATCH` rows whose partitions share a replica set (the token-aware coordinator then owns
        every row: no fan-out); idempotent upserts only, as an unlogged batch is not atomic."""
        bound = [(await self.prepare(cql)).bind(params) for cql, params in statements]
        batches = group_by_replicas(
            bound, PER_BATCH, lambda stmt: replica_set(self.session.cluster.metadata, self.keyspace, stmt)
        )
        try:
            await self.bridge.execute_all(batches, what=what)
        except DbError as err:
            raise translate(err, what) from err

    async def logged_many(self, batches: Sequence[Sequence[tuple[str, Params]]], what: str) -> None:
        """Several LOGGED batches at once (within the bridge's in-flight bound), each atomic on its own;
        returns once all are acknowledged, or raises the first failure (others may have applied)."""
        built = []
        for statements in batches:
            batch = BatchStatement(batch_type=BatchType.LOGGED)
            for cql, params in statements:
                batch.add(await self.prepare(cql), params)
            built.append(batch)
        try:
            await self.bridge.execute_all(built, what=what)
        except DbError as err:
            raise translate(err, what) from err

    async def conditional(self, cql: str, params: Params, what: str) -> bool:
        """Run a lightweight transaction; whether it applied."""
        stmt = await self.prepare(cql)
        try:
            page = await self.bridge.fetch(stmt, params, what=what)
        except DbError as err:
            raise translate(err, what) from err
        return bool(page.rows[0][0])
