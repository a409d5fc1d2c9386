"""The storage protocol every archive adapter implements (docs/archive.md).

Methods are ``async``: the archive service runs on grpc.aio. Adapters bridge blocking drivers (sqlite3,
cassandra-driver) into the event loop themselves, with bounded concurrency. Backend failures surface only as
:class:`archivestore.errors.StoreError` subclasses; caller mistakes (no topics and no bloom, ``limit < 1``)
raise ``ValueError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from archivestore.types import (
    BucketInfo,
    ExpireRequest,
    ExpireResult,
    PackedPage,
    PutItem,
    PutResult,
    Query,
    QueryPage,
    ShardPlanEntry,
    Stats,
    StoredEnvelope,
)


class ArchiveStore(Protocol):
    """An envelope archive: idempotent writes, ordered range queries, maintenance for retention and Spark."""

    backend: str

    async def open(self) -> None:
        """Connect and create or migrate the schema (versioned). Idempotent."""

    async def close(self) -> None:
        """Release connections; pending writes are finished first."""

    async def put(self, items: Sequence[PutItem], *, now: int) -> PutResult:
        """Store a batch durably; returns only once every item is acknowledged by the backend.

        Idempotent by envelope hash: re-putting a stored envelope is a no-op reported as DUPLICATE.
        ``now`` (UNIX seconds) decides retention TTLs, so tests can control time.
        """
        ...

    async def get(
        self, *, envelope_hash: bytes | None = None, message_hash: bytes | None = None, now: int
    ) -> StoredEnvelope | None:
        """Look one envelope up by envelope hash or 14/WAKU2 message hash; None when absent or expired."""
        ...

    async def contains(self, hashes: Sequence[bytes], *, now: int) -> list[bool]:
        """For each hash (envelope or message hash), whether it is stored and not expired."""
        ...

    async def query(self, query: Query, *, now: int) -> QueryPage:
        """Envelopes matching ``query`` in ``(sent, hash)`` order (reversed if BACKWARD), up to ``limit``."""
        ...

    async def query_packed(self, query: Query, *, now: int) -> PackedPage:
        """The page :meth:`query` returns, as columns (same envelopes, same order, same ``has_more``)."""
        ...

    async def stats(self, *, now: int) -> Stats:
        """Counts for operators."""
        ...

    def list_buckets(self, table: str, lower_bucket: int, upper_bucket: int) -> AsyncIterator[BucketInfo]:
        """Every non-empty storage partition of ``table`` whose bucket is in range, with sizes."""
        ...

    async def delete_buckets(self, buckets: Sequence[BucketInfo]) -> int:
        """Delete whole partitions (never rows inside live partitions); returns how many were deleted."""
        ...

    async def get_shard_plan(self, table: str) -> list[ShardPlanEntry]:
        """The shard plan entries for ``table`` (buckets without an entry use the default)."""
        ...

    async def put_shard_plan(self, entries: Sequence[ShardPlanEntry]) -> None:
        """Publish shard plan entries; writers and readers use them from the next operation on."""
        ...

    async def expire(self, request: ExpireRequest, *, now: int) -> ExpireResult:
        """Remove envelopes past retention (whole partitions where the model allows)."""
        ...
