"""Reads and writes of the small bookkeeping tables: shard plan, erasures, and the day/topic catalogues.

They are read per operation (one small single-partition read each, issued concurrently with the other reads of
the operation) rather than cached, so a plan published or an erasure recorded by another replica (or the
Spark job) applies from the very next operation on every replica.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cassandra.query import UNSET_VALUE

from archivestore.cassandra.bridge import ArchiveBridge
from archivestore.cassandra.layout import DAY_S, ShardPlan, check_table
from archivestore.cassandra.statements import Prepared
from archivestore.types import ShardPlanEntry
from archivestore.visibility import Erasure, Erasures

#: A range of at most this many days is probed day by day; longer ranges first read the days catalogue.
DIRECT_DAYS = 8


@dataclass
class Catalog:
    """Loaders for plan, cutoffs and catalogues over one bridge."""

    bridge: ArchiveBridge
    q: Prepared
    default_shards: dict[str, int]
    bucket_seconds: int

    async def plan(self, table: str, lo: int, hi: int) -> ShardPlan:
        """The shard plan of ``table`` for buckets ``lo..hi``."""
        check_table(table)
        rows = await self.bridge.fetch_all(self.q.sel_plan, (table, lo, hi), what="shard plan read")
        entries = [ShardPlanEntry(table, b, g, s) for b, g, s in rows]
        return ShardPlan.from_rows(table, self.default_shards[table], entries)

    async def plan_entries(self, table: str) -> list[ShardPlanEntry]:
        """Every plan row of ``table`` (all generations)."""
        rows = await self.bridge.fetch_all(
            self.q.sel_plan, (table, -(2**63), 2**63 - 1), what="shard plan read"
        )
        return [ShardPlanEntry(table, b, g, s) for b, g, s in rows]

    async def erasures(self) -> Erasures:
        """Every recorded erasure, newest first."""
        rows = await self.bridge.fetch_all(self.q.sel_erasures, (), what="erasure read")
        items = [
            Erasure(applied, lo, hi, topic, frozenset(excl or ()), mod, rem, seq)
            for applied, seq, lo, hi, topic, excl, mod, rem in rows
        ]
        items.sort(key=lambda e: e.applied_at, reverse=True)
        return Erasures(tuple(items))

    async def record_erasures(self, new: Sequence[Erasure], ttl: int) -> None:
        """Persist erasures (``ttl`` 0 = kept until dominated), then forget the ones they make redundant."""
        if not new:
            return
        old = await self.erasures()
        stmts = [
            self.q.ins_erasure.bind(
                (
                    e.applied_at,
                    e.seq,
                    e.lo,
                    e.hi,
                    UNSET_VALUE if e.topic is None else e.topic,
                    set(e.except_topics) or UNSET_VALUE,
                    e.modulus,
                    e.remainder,
                    ttl,
                )
            )
            for e in new
        ]
        await self.bridge.execute_all(stmts, what="erasure write")
        # Erasures are few and live in one partition that every read loads; drop the dominated ones so the
        # partition stays small (a handful of row tombstones there is cheap, unlike in envelope partitions).
        doomed = [o for o in old.items if any(n.dominates(o) for n in new)]
        await self.bridge.execute_all(
            (self.q.del_erasure.bind((o.applied_at, o.seq)) for o in doomed), what="erasure prune"
        )

    async def buckets(self, lo: int, hi: int, now: int) -> list[int]:
        """Time buckets in ``lo..hi`` holding rows whose retention class outlives ``now`` (ascending)."""
        if lo > hi:
            return []
        rows = await self.bridge.fetch_all(self.q.sel_buckets, (lo, hi), what="bucket catalogue read")
        return sorted({bucket for bucket, keep_until in rows if keep_until > now})

    async def days(self, lo: int, hi: int, now: int, *, direct: bool = True) -> list[int]:
        """Days in ``lo..hi`` that may hold rows (ascending).

        A short range is returned as it is (probing an empty topic-day partition costs one bloom-filter
        check); a long one is cut down to the days that have catalogued buckets.
        """
        if lo > hi:
            return []
        if direct and hi - lo < DIRECT_DAYS:
            return list(range(lo, hi + 1))
        bs = self.bucket_seconds
        buckets = await self.buckets(lo * DAY_S // bs, ((hi + 1) * DAY_S - 1) // bs, now)
        return sorted({d for d in (b * bs // DAY_S for b in buckets) if lo <= d <= hi})

    async def topics_on(
        self, days: Sequence[int], now: int, only: Iterable[bytes] | None = None
    ) -> dict[int, set[bytes]]:
        """For each day, the topics with live catalogue entries (restricted to ``only`` when given)."""
        if only is None:
            pages = await asyncio.gather(
                *(self.bridge.fetch_all(self.q.sel_topics_day, (d,), what="topic catalogue") for d in days)
            )
        else:
            wanted = sorted(only)
            pages = await asyncio.gather(
                *(
                    self.bridge.fetch_all(self.q.sel_topics_day_in, (d, wanted), what="topic catalogue")
                    for d in days
                )
            )
        return {
            d: {t for t, keep_until in rows if keep_until > now} for d, rows in zip(days, pages, strict=True)
        }
