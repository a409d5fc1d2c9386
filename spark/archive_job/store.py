"""The ArchiveStore seen from the (synchronous) Spark driver: one private event loop runs its coroutines.

The job changes the archive only through the store's public maintenance methods (``expire``,
``delete_buckets``, ``put_shard_plan``), through connector writes of rows whose place comes from
:mod:`archivestore.cassandra.layout`, and through whole-partition deletes. Two Cassandra reads have no
protocol method yet and use the adapter's catalog directly: every generation of the shard plan
(``get_shard_plan`` returns only the newest per bucket) and the recorded erasures (which decide what
readers see). See docs/spark.md "What the store still lacks".
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from archivestore.cassandra.layout import ShardPlan
from archivestore.cassandra.store import CassandraStore
from archivestore.protocol import ArchiveStore
from archivestore.types import BucketInfo, ExpireRequest, ExpireResult, ShardPlanEntry
from archivestore.visibility import Erasures

__all__ = ["StoreClient"]

T = TypeVar("T")


class StoreClient:
    """Synchronous access to one :class:`ArchiveStore` (open it with :meth:`open`, then :meth:`close`)."""

    def __init__(self, store: ArchiveStore) -> None:
        self.store = store
        self._loop = asyncio.new_event_loop()

    @property
    def backend(self) -> str:
        """``sqlite`` or ``cassandra``."""
        return self.store.backend

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one coroutine of the store to completion on the private loop."""
        return self._loop.run_until_complete(coro)

    def open(self) -> None:
        """Open the store (connects, creates or migrates the schema)."""
        self.run(self.store.open())

    def close(self) -> None:
        """Close the store and the loop."""
        try:
            self.run(self.store.close())
        finally:
            self._loop.close()

    # ------------------------------------------------------------------ protocol maintenance
    def expire(self, request: ExpireRequest, now: int) -> ExpireResult:
        """The store's own expiry (an erasure readers apply at once, and whole-partition deletes)."""
        return self.run(self.store.expire(request, now=now))

    def delete_buckets(self, buckets: Sequence[BucketInfo]) -> int:
        """Delete whole (virtual, on SQLite) partitions."""
        return self.run(self.store.delete_buckets(buckets))

    def put_shard_plan(self, entries: Sequence[ShardPlanEntry]) -> None:
        """Publish plan entries: writers and readers use them from their next operation."""
        if entries:
            self.run(self.store.put_shard_plan(entries))

    # ------------------------------------------------------------------ Cassandra only
    @property
    def cassandra(self) -> CassandraStore:
        """The Cassandra adapter (TypeError on another backend)."""
        if not isinstance(self.store, CassandraStore):
            raise TypeError(f"the {self.store.backend} store has no Cassandra catalog")
        return self.store

    def shard_plans(self, tables: Iterable[str]) -> dict[str, ShardPlan]:
        """Each table's plan with every recorded generation, as readers and writers build it."""
        store = self.cassandra

        async def load(table: str) -> ShardPlan:
            entries = await store.cat.plan_entries(table)
            return ShardPlan.from_rows(table, store.default_shards[table], entries)

        return {t: self.run(load(t)) for t in tables}

    def erasures(self) -> Erasures:
        """Every recorded erasure (newest first)."""
        return self.run(self.cassandra.cat.erasures())
