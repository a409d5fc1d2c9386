"""Maintenance on Cassandra: list/delete partitions, expire, stats (docs/archive.md "Cassandra adapter").

Deletes are whole partitions only. What must disappear at a finer grain (a cutoff inside a partition, or a
deleted time bucket whose envelopes also sit in topic partitions) is recorded as an :class:`Erasure`: readers
hide the covered rows written before it at once, whole partitions are deleted, and the remaining covered
rows leave with their TTL (or the Spark job's rewrite). No row tombstone is ever written into an envelope
partition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from archivestore.cassandra.catalog import Catalog
from archivestore.cassandra.layout import GENERATION_STRIDE, ShardPlan, bucket_span, check_table
from archivestore.cassandra.query import FF, ZERO
from archivestore.cassandra.schema import MAX_TTL_S, TIME_TABLE, TOPIC_TABLE
from archivestore.types import BucketInfo, ExpireRequest, ExpireResult, Stats
from archivestore.visibility import Erasure, Erasures, visible

MIN_SENT = -(2**63)
MAX_SENT = 2**63 - 1
ALL_BUCKETS = (-(2**40), 2**40)
#: A "now" before every retention: catalogue entries of rows that are still physically present.
ANY_TIME = -(2**62)


def now_us() -> int:
    """The client clock in microseconds, the scale of write timestamps (the driver stamps each write)."""
    return time.time_ns() // 1000


@dataclass(frozen=True)
class MetaRow:
    """A row's key, topic, expiry, size and write time (no raw bytes)."""

    sent: int
    hash: bytes
    topic: bytes
    expires_at: int | None
    size: int
    written_at: int | None


@dataclass
class Maintenance:
    """Maintenance operations over a catalog."""

    cat: Catalog
    bucket_seconds: int
    erasure_keep_s: int | None  # longest retention: erasures may be forgotten once their rows expired

    # ------------------------------------------------------------------ partition scans
    async def _scan(
        self, table: str, key: tuple[object, ...], topic: bytes | None, lo: int, hi: int
    ) -> list[MetaRow]:
        q = self.cat.q
        stmt = q.meta_time if table == TIME_TABLE else q.meta_topic
        rows = await self.cat.bridge.fetch_all(stmt, (*key, lo - 1, FF, hi + 1, ZERO), what="partition scan")
        if table == TIME_TABLE:
            return [MetaRow(s, h, t, e, z or 0, w) for s, h, t, e, z, w in rows]
        assert topic is not None
        return [MetaRow(s, h, topic, e, z or 0, w) for s, h, e, z, w in rows]

    def _partitions(
        self, table: str, plan: ShardPlan, bucket: int, topics: Sequence[bytes]
    ) -> list[tuple[object, ...]]:
        shards = plan.all_shards(bucket)
        if table == TIME_TABLE:
            return [(bucket, s) for s in shards]
        return [(t, bucket, s) for t in topics for s in shards]

    async def _buckets(self, table: str, lo: int, hi: int) -> list[int]:
        """Buckets of ``table`` in ``lo..hi`` the catalogue knows of (physically present rows)."""
        if table == TIME_TABLE:
            return await self.cat.buckets(lo, hi, ANY_TIME)
        return await self.cat.days(lo, hi, ANY_TIME, direct=False)

    # ------------------------------------------------------------------ list / delete
    async def list_buckets(self, table: str, lower: int, upper: int) -> AsyncIterator[BucketInfo]:
        """Non-empty partitions of ``table`` with buckets in ``[lower, upper]`` (all shard generations)."""
        check_table(table)
        buckets = await self._buckets(table, lower, upper)
        if not buckets:
            return
        plan, erasures = await asyncio.gather(
            self.cat.plan(table, buckets[0], buckets[-1]), self.cat.erasures()
        )
        topics_by_day = await self.cat.topics_on(buckets, ANY_TIME) if table == TOPIC_TABLE else {}
        for bucket in buckets:
            first, last = bucket_span(table, bucket, self.bucket_seconds)
            er = erasures.within(first, last)
            keys = self._partitions(table, plan, bucket, sorted(topics_by_day.get(bucket, ())))
            infos = await asyncio.gather(*(self._size(table, k, er, first, last) for k in keys))
            for k, (rows, size) in zip(keys, infos, strict=True):
                if rows:
                    topic = k[0] if table == TOPIC_TABLE else None
                    shard = k[-1]
                    assert isinstance(shard, int) and (topic is None or isinstance(topic, bytes))
                    yield BucketInfo(table, bucket, shard, rows, size, topic)

    async def _size(
        self, table: str, key: tuple[object, ...], er: Erasures, first: int, last: int
    ) -> tuple[int, int]:
        if not er:  # nothing erased here: let the server count
            stmt = self.cat.q.size_time if table == TIME_TABLE else self.cat.q.size_topic
            page = await self.cat.bridge.fetch(stmt, key, what="partition size")
            count, size = page.rows[0]
            return int(count), int(size or 0)
        topic = key[0] if table == TOPIC_TABLE else None
        rows = await self._scan(table, key, topic if isinstance(topic, bytes) else None, first, last)
        live = [r for r in rows if not er.hides(r.sent, r.topic, r.hash, r.written_at)]
        return len(live), sum(r.size for r in live)

    async def delete_buckets(self, buckets: Sequence[BucketInfo]) -> int:
        """Delete whole partitions; returns how many held rows.

        A partition of the bucket's *current* generation holds the live copy of its envelopes, so deleting it
        deletes those envelopes: an erasure hides their rows in the other tables too. A partition of an older
        generation (left behind by a Spark repartition) is only a stale copy and is just dropped.
        """
        for info in buckets:
            check_table(info.table)
        if not buckets:
            return 0
        targets = [
            (
                info,
                (info.bucket, info.shard)
                if info.table == TIME_TABLE
                else (info.topic, info.bucket, info.shard),
            )
            for info in buckets
            if info.table == TIME_TABLE or info.topic is not None
        ]
        erasures, plans, scans = await asyncio.gather(
            self.cat.erasures(),
            asyncio.gather(*(self.cat.plan(i.table, i.bucket, i.bucket) for i, _ in targets)),
            asyncio.gather(
                *(
                    self._scan(i.table, k, i.topic, *bucket_span(i.table, i.bucket, self.bucket_seconds))
                    for i, k in targets
                )
            ),
        )
        applied = now_us()
        new: list[Erasure] = []
        deletes: list[Any] = []
        for seq, ((info, key), plan, rows) in enumerate(zip(targets, plans, scans, strict=True)):
            first, last = bucket_span(info.table, info.bucket, self.bucket_seconds)
            er = erasures.within(first, last)
            if all(er.hides(r.sent, r.topic, r.hash, r.written_at) for r in rows):
                continue  # empty (or only erased rows): nothing to delete
            gen = plan.current(info.bucket)
            if info.shard // GENERATION_STRIDE == gen.generation:
                mod, rem = gen.shards, info.shard % GENERATION_STRIDE
                new.append(Erasure(applied, first, last + 1, info.topic, frozenset(), mod, rem, seq))
            stmt = self.cat.q.del_time if info.table == TIME_TABLE else self.cat.q.del_topic
            deletes.append(stmt.bind(key))
        await self.cat.record_erasures(new, self._erasure_ttl(max((e.hi for e in new), default=0), applied))
        await self.cat.bridge.execute_all(deletes, what="delete_buckets")
        return len(deletes)

    def _erasure_ttl(self, hi: int, applied_us: int) -> int:
        """Keep an erasure until every row it may hide has expired (0 = no TTL: retention is unbounded)."""
        if self.erasure_keep_s is None:
            return 0
        ttl = hi + self.erasure_keep_s - applied_us // 1_000_000 + 86400
        return 0 if ttl > MAX_TTL_S else max(ttl, 60)

    # ------------------------------------------------------------------ expire
    async def expire(self, request: ExpireRequest, now: int) -> ExpireResult:
        """Erase rows below the cutoffs (a topic's own cutoff replaces the global one for that topic).

        Counts follow the protocol's reference model: ``envelopes`` rows removed, ``partitions`` distinct time
        buckets they were in. Whole partitions entirely below their cutoff are deleted; the rest are hidden.
        """
        cuts = dict(request.topic_cutoffs)
        applied = now_us()
        new: list[Erasure] = []
        if request.cutoff is not None:
            new.append(Erasure(applied, MIN_SENT, request.cutoff, None, frozenset(cuts), seq=0))
        for seq, (topic, cut) in enumerate(sorted(cuts.items()), start=1):
            new.append(Erasure(applied, MIN_SENT, cut, topic, seq=seq))
        if not new:
            return ExpireResult(0, 0, request.dry_run)
        horizon = max(e.hi for e in new)
        target = Erasures(tuple(new))
        buckets, erasures = await asyncio.gather(
            self.cat.buckets(ALL_BUCKETS[0], (horizon - 1) // self.bucket_seconds, ANY_TIME),
            self.cat.erasures(),
        )
        days = sorted({b * self.bucket_seconds // 86400 for b in buckets})
        doomed = 0
        touched: set[int] = set()
        deletes: list[Any] = []
        if buckets:
            plan = await self.cat.plan(TIME_TABLE, buckets[0], buckets[-1])
            keys = [(b, sh) for b in buckets for sh in plan.all_shards(b)]
            spans = {b: bucket_span(TIME_TABLE, b, self.bucket_seconds) for b in buckets}
            scans = await asyncio.gather(*(self._scan(TIME_TABLE, k, None, *spans[k[0]]) for k in keys))
            gone_by_bucket: dict[int, set[bytes]] = {}
            for key, rows in zip(keys, scans, strict=True):
                er = erasures.within(*spans[key[0]])
                live = [r for r in rows if not er.hides(r.sent, r.topic, r.hash, r.written_at)]
                # written_at < applied: the new erasures hide every row present now (not later re-puts)
                gone = [r for r in live if target.hides(r.sent, r.topic, r.hash, applied - 1)]
                if rows and len(gone) == len(live):
                    deletes.append(self.cat.q.del_time.bind(key))  # nothing visible would be left in it
                if gone:  # an envelope copied into a newer generation counts once
                    gone_by_bucket.setdefault(key[0], set()).update(r.hash for r in gone)
            doomed = sum(len(h) for h in gone_by_bucket.values())
            touched = set(gone_by_bucket)
            deletes += await self._topic_partitions_below(days, target)
        if not request.dry_run:
            await self.cat.record_erasures(new, self._erasure_ttl(horizon, applied))
            await self.cat.bridge.execute_all(deletes, what="expire")
        return ExpireResult(doomed, len(touched), request.dry_run)

    async def _topic_partitions_below(self, days: list[int], target: Erasures) -> list[Any]:
        """Deletes for the topic-day partitions whose whole day lies below the topic's new cutoff."""
        days = [d for d in days if any(e.lo <= d * 86400 < e.hi for e in target.items)]
        if not days:
            return []
        catalogue, plan = await asyncio.gather(
            self.cat.topics_on(days, ANY_TIME), self.cat.plan(TOPIC_TABLE, days[0], days[-1])
        )
        out = []
        for day in days:
            last = bucket_span(TOPIC_TABLE, day, self.bucket_seconds)[1]
            for topic in sorted(catalogue.get(day, ())):
                # Erasures made by expire run from MIN_SENT, so covering the day's last second covers the day.
                if any(e.covers_row(last, topic, ZERO) for e in target.items):
                    out += [self.cat.q.del_topic.bind((topic, day, s)) for s in plan.all_shards(day)]
        return out

    # ------------------------------------------------------------------ stats
    async def stats(self, now: int, exact_max_rows: int) -> Stats:
        """Visible envelopes and topics, oldest/newest ``sent``.

        First the server counts unexpired rows per time partition (``COUNT(*)``, no rows shipped). When that
        total is at most ``exact_max_rows`` the partitions are scanned without their raw bytes and every
        figure is exact (erasures applied, copies in two shard generations counted once). Above it, exact
        figures would mean shipping every row through Python, so ``envelopes`` is the server count of the
        current generations (erasures not applied), ``topics`` comes from the day catalogue, oldest/newest
        from the first and last non-empty buckets, and ``detail["estimated"]`` is 1.
        """
        buckets, erasures = await asyncio.gather(self.cat.buckets(*ALL_BUCKETS, now), self.cat.erasures())
        detail = {"buckets": len(buckets), "erasures": len(erasures.items), "estimated": 0}
        if not buckets:
            return Stats(0, 0, None, None, "cassandra", detail)
        plan = await self.cat.plan(TIME_TABLE, buckets[0], buckets[-1])
        current = [(b, s) for b in buckets for s in plan.current_shards(b)]
        q = self.cat.q
        pages = await asyncio.gather(
            *(
                self.cat.bridge.fetch(q.count_time, (*k, MIN_SENT, FF, MAX_SENT, ZERO, now), what="stats")
                for k in current
            )
        )
        counted = sum(int(p.rows[0][0]) for p in pages)
        detail["rows_unexpired"] = counted
        if counted <= exact_max_rows:
            keys = [(b, s) for b in buckets for s in plan.all_shards(b)]
            scans = await asyncio.gather(
                *(self._scan(TIME_TABLE, k, None, MIN_SENT + 1, MAX_SENT - 1) for k in keys)
            )
            live = {
                r.hash: r
                for rows in scans
                for r in rows
                if visible(r.sent, r.topic, r.hash, r.expires_at, r.written_at, now, erasures)
            }.values()
            sents = [r.sent for r in live]
            topics = {r.topic for r in live}
            return Stats(
                len(sents),
                len(topics),
                min(sents, default=None),
                max(sents, default=None),
                "cassandra",
                detail,
            )
        days = sorted({b * self.bucket_seconds // 86400 for b in buckets})
        catalogue = await self.cat.topics_on(days, now)
        oldest = await self._edge(TIME_TABLE, plan, buckets, now, erasures)
        newest = await self._edge(TIME_TABLE, plan, buckets[::-1], now, erasures)
        detail["estimated"] = 1
        return Stats(counted, len(set().union(*catalogue.values())), oldest, newest, "cassandra", detail)

    async def _edge(
        self, table: str, plan: ShardPlan, buckets: Sequence[int], now: int, er: Erasures
    ) -> int | None:
        """The smallest (buckets ascending) or largest (descending) visible ``sent``."""
        for bucket in buckets:
            first, last = bucket_span(table, bucket, self.bucket_seconds)
            scans = await asyncio.gather(
                *(self._scan(table, (bucket, s), None, first, last) for s in plan.all_shards(bucket))
            )
            sents = [
                r.sent
                for rows in scans
                for r in rows
                if visible(r.sent, r.topic, r.hash, r.expires_at, r.written_at, now, er)
            ]
            if sents:
                return min(sents) if buckets[0] <= buckets[-1] else max(sents)
        return None
