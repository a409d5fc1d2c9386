"""Record listings on Cassandra: by content topic and by subscription, with MESSAGING-API skip/take.

Rows live in partitions of (key, time bucket of created_at), clustered by (created_at, message hash), so a
bucket reads in listing order. ``record_buckets`` keeps each bucket's row count as a plain column written by
the single records writer; :func:`msgstore.paging.plan_reads` turns the counts into the few bucket reads a
``skip``/``take`` needs, so ``skip=10000`` passes whole buckets without reading them. Cassandra has no
OFFSET: inside the first bucket read the skipped rows are read and dropped (at most one bucket's worth).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from msgstore.cassandra.payloads import Payloads
from msgstore.cassandra.session import Cql
from msgstore.codec import decode_record
from msgstore.paging import plan_reads
from msgstore.types import Record

__all__ = ["SUBSCRIPTION", "TABLES", "TOPIC", "Listings"]

TOPIC, SUBSCRIPTION = "t", "s"
#: Listing kind → (table, partition key column).
TABLES = {
    TOPIC: ("records_by_topic", "content_topic"),
    SUBSCRIPTION: ("records_by_subscription", "subscription_id"),
}
_GROUP = 50


class Listings:
    """Reads of the listing tables and of the records they name."""

    def __init__(self, cql: Cql, payloads: Payloads) -> None:
        self._cql = cql
        self._payloads = payloads

    async def counts(self, kind: str, key: str) -> list[tuple[int, int]]:
        """(bucket, rows) of a listing, in bucket order."""
        rows = await self._cql.rows(
            "SELECT bucket, rows FROM {ks}.record_buckets WHERE kind = ? AND key = ?",
            (kind, key),
            "read counts",
        )
        return [(b, n or 0) for b, n in rows]

    async def page(self, kind: str, key: str, skip: int | None, take: int | None) -> list[Record]:
        """Rows ``[skip, skip + take)`` of a listing, as records."""
        table, column = TABLES[kind]
        hashes: list[bytes] = []
        for read in plan_reads(await self.counts(kind, key), skip, take):
            cql = f"SELECT message_hash FROM {{ks}}.{table} WHERE {column} = ? AND bucket = ?"
            params: tuple[object, ...] = (key, read.bucket)
            if read.limit is not None:
                cql += " LIMIT ?"
                params += (read.offset + read.limit,)
            rows = await self._cql.rows(cql, params, "list records")
            hashes += [r[0] for r in rows[read.offset :]]
        return await self.records(hashes)

    async def records(self, hashes: Sequence[bytes], *, payloads: bool = True) -> list[Record]:
        """The records of ``hashes`` in that order (ones gone since are left out).

        ``payloads=False`` leaves ``message.payload`` empty and saves reading it (the writer only needs
        a record's previous keys).
        """
        groups = [list(hashes[i : i + _GROUP]) for i in range(0, len(hashes), _GROUP)]
        reads = [
            self._cql.rows(
                "SELECT message_hash, body FROM {ks}.records WHERE message_hash IN ?", (g,), "read records"
            )
            for g in groups
        ]
        if payloads:
            docs_groups, found = await asyncio.gather(asyncio.gather(*reads), self._payloads.get(hashes))
        else:
            docs_groups, found = await asyncio.gather(*reads), {}
        docs = {h: body for rows in docs_groups for h, body in rows}
        return [decode_record(docs[h], found.get(h, b"")) for h in hashes if h in docs]
