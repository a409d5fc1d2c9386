"""The stages of a run on Cassandra (docs/spark.md "How a run works").

1. **extract**  scan the small columns of each table, classify rows, size partitions; (expire) scan keys.
2. **plan**     per bucket: move, converge or leave; collect partitions deleted whole (expired, orphans).
3. **erase**    (expire) the store's own ``expire``: readers stop returning expired envelopes at once.
4. **copy**     moved buckets: live rows of every generation, one per hash, into the new generation
               (unpublished yet: nobody reads it).
5. **publish**  the new generations go into the shard plan: writers write there, readers merge it too.
6. **grace**    wait out puts that read the old plan before it changed.
7. **converge** moved and stale buckets: copy live rows of older generations that the current one lacks,
               verify none is missing, list the older partitions for deletion.
8. **delete**   whole partitions, on the executors.
9. **summary**  largest partitions after the run.

A run can die anywhere and the next run finishes the work from what it finds: a generation written but
not published is an orphan (deleted; the move starts over under a newer generation); a published move
whose old partitions still hold rows is converged; a delete that did not happen is found again.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from archivestore.cassandra.layout import ShardPlan
from archivestore.types import ExpireRequest, ShardPlanEntry
from dbkit.cassandra.cluster import ConnectOptions
from spark.archive_job.context import Context
from spark.archive_job.decide import BucketStats, Plan, Role, decide
from spark.archive_job.executor import DeleteTarget, Deletion
from spark.archive_job.extract import key_frame, meta_of, rows_of, scan_keys, scan_meta, topics_of_days
from spark.archive_job.load import delete_partitions, write_copies
from spark.archive_job.rows import RowFlags, doomed_column, live_column, row_flags, stranded_column
from spark.archive_job.tables import KEYS, TABLES, TableSpec
from spark.archive_job.transform import (
    FLAGS,
    PartitionSize,
    bucket_stats,
    classify,
    copies,
    largest,
    missing,
    partition_stats,
)

__all__ = ["STAGES", "ConcurrentChange", "CopyIncomplete", "run", "stages"]

STAGES = ("extract", "plan", "erase", "copy", "publish", "grace", "converge", "delete", "summary")


def stages(expire: bool, dry: bool) -> tuple[str, ...]:
    """The stages a run goes through."""
    if dry:
        return STAGES[:2]
    return tuple(s for s in STAGES if expire or s != "erase")


class ConcurrentChange(RuntimeError):
    """The shard plan changed under the run (another job?): nothing old is deleted; re-run later."""


class CopyIncomplete(RuntimeError):
    """Rows of an older generation are missing from the current one after copying: nothing is deleted."""


@dataclass
class Scan:
    """One table after extract: partition statistics (cached) and per-bucket statistics."""

    spec: TableSpec
    pstats: DataFrame
    buckets: list[BucketStats]


@dataclass
class Deletes:
    """Partitions to delete whole, with the rows each held when last seen."""

    rows: dict[Deletion, int] = field(default_factory=dict)

    def add(self, item: Deletion, rows: int) -> None:
        """Schedule one partition."""
        self.rows[item] = max(rows, self.rows.get(item, 0))


def _deletion(spec: TableSpec, bucket: int, shard: int, ptopic: bytes | None) -> Deletion:
    if spec.topic_in_key:
        assert ptopic is not None
        return (spec.name, (bytes(ptopic), bucket, shard))
    return (spec.name, (bucket, shard))


def _sizes(df: DataFrame, table: str) -> list[PartitionSize]:
    """Partition sizes of meta rows (for the report)."""
    grouped = df.groupBy("bucket", "shard", "ptopic").agg(
        sf.count(sf.lit(1)).alias("rows"), sf.coalesce(sf.sum("size"), sf.lit(0)).alias("bytes")
    )
    return [
        PartitionSize(
            table,
            int(r["bucket"]),
            int(r["shard"]),
            None if r["ptopic"] is None else bytes(r["ptopic"]).hex(),
            int(r["rows"]),
            int(r["bytes"]),
        )
        for r in grouped.collect()
    ]


def _top(parts: Iterable[PartitionSize], n: int) -> list[PartitionSize]:
    return sorted(parts, key=lambda p: (-p.rows, -p.bytes, p.table, p.bucket, p.shard))[:n]


def run(ctx: Context) -> None:
    """Run every stage (stops after ``plan`` when dry)."""
    ks = ctx.archive.cassandra.keyspace
    specs = [TABLES[t] for t in ctx.job.tables]
    policy, cutoffs, rep, st = ctx.policy, ctx.cutoffs, ctx.report, ctx.stages
    deletes = Deletes()

    with st.stage("extract") as log:
        plans = ctx.store.shard_plans(TABLES)
        flags = row_flags(ctx.now, ctx.store.erasures(), cutoffs, ctx.job.rewrite_min_ttl_s)
        scans: dict[str, Scan] = {}
        for spec in specs:
            meta = classify(scan_meta(ctx.spark, ks, spec), flags).persist()
            pstats = partition_stats(meta, spec.name, plans[spec.name], policy.expire).persist()
            buckets = bucket_stats(spec.name, pstats)
            rep.rows_scanned[spec.name] = sum(b.rows for b in buckets)
            if policy.expire and not spec.topic_in_key:
                rep.envelopes_expired = (
                    meta.filter(doomed_column(sf.col(FLAGS))).select("hash").distinct().count()
                )
            meta.unpersist()
            scans[spec.name] = Scan(spec, pstats, buckets)
        if policy.expire:
            _scan_keys(ctx, flags, deletes)
        rep.largest_before = _top(
            (p for s in scans.values() for p in largest(s.pstats, ctx.job.top_partitions)),
            ctx.job.top_partitions,
        )
        log.note(", ".join(f"{t} {n} rows" for t, n in rep.rows_scanned.items()))

    with st.stage("plan") as log:
        plan = decide([b for s in scans.values() for b in s.buckets], plans, policy)
        dropped = orphans = 0
        for scan in scans.values():
            special = sf.col("dropped") | sf.col("role").isin(Role.ORPHAN, Role.UNREACHABLE)
            for r in (
                scan.pstats.filter(special)
                .select("bucket", "shard", "ptopic", "rows", "role", "dropped")
                .collect()
            ):
                if r["role"] == Role.UNREACHABLE:
                    rep.unreachable_partitions += 1
                    continue
                deletes.add(
                    _deletion(scan.spec, int(r["bucket"]), int(r["shard"]), r["ptopic"]), int(r["rows"])
                )
                dropped += bool(r["dropped"])
                orphans += r["role"] == Role.ORPHAN
        rep.plan = [
            *plan.lines(),
            f"delete {dropped} expired partition(s), {orphans} orphan(s) of unfinished runs, "
            f"{len(deletes.rows) - dropped - orphans} key partition(s)",
        ]
        for line in rep.plan:
            st.say(line)
        log.note(f"{len(plan.moves)} move(s), {len(plan.converge)} converge, {len(deletes.rows)} delete(s)")
    if ctx.dry:
        return

    if policy.expire:
        assert cutoffs is not None
        with st.stage("erase") as log:
            result = ctx.store.expire(ExpireRequest(cutoffs.cutoff, dict(cutoffs.per_topic)), ctx.now)
            log.note(f"store expire: {result.envelopes} envelope(s) in {result.partitions} bucket(s)")

    with st.stage("copy") as log:
        fresh = row_flags(ctx.now, ctx.store.erasures(), None, ctx.job.rewrite_min_ttl_s)
        for scan in scans.values():
            rep.rows_moved += _copy_moves(ctx, scan, plan, fresh)
        log.note(f"{rep.rows_moved} row(s) into {len(plan.moves)} new generation(s)")

    with st.stage("publish") as log:
        entries = [
            ShardPlanEntry(m.table, m.bucket, m.target.generation, m.target.shards) for m in plan.moves
        ]
        ctx.store.put_shard_plan(entries)
        rep.plan_entries = [
            {"table": e.table, "bucket": e.bucket, "generation": e.generation, "shards": e.shards}
            for e in entries
        ]
        rep.buckets_moved = len(entries)
        log.note(f"{len(entries)} plan entr{'y' if len(entries) == 1 else 'ies'}")

    with st.stage("grace") as log:
        if plan.moves or plan.converge:
            time.sleep(ctx.job.plan_grace_s)
        log.note(f"{ctx.job.plan_grace_s:g} s for puts that read the old plan")

    after: list[PartitionSize] = []
    with st.stage("converge") as log:
        plans = ctx.store.shard_plans(TABLES)
        for m in plan.moves:
            if plans[m.table].current(m.bucket) != m.target:
                raise ConcurrentChange(f"{m.table} bucket {m.bucket}: plan is not the one published")
        fresh = row_flags(ctx.now, ctx.store.erasures(), None, ctx.job.rewrite_min_ttl_s)
        copied = 0
        for scan in scans.values():
            todo = sorted(
                {m.bucket for m in plan.moves if m.table == scan.spec.name}
                | {b for t, b in plan.converge if t == scan.spec.name}
            )
            if todo:
                n, sizes = _converge(ctx, scan, plans[scan.spec.name], todo, fresh, deletes)
                copied += n
                after += sizes
        rep.rows_moved += copied
        rep.buckets_converged = len({(m.table, m.bucket) for m in plan.moves} | set(plan.converge))
        log.note(f"{copied} missing row(s) copied, {rep.buckets_converged} bucket(s) verified")

    with st.stage("delete") as log:
        opts = ctx.archive
        connect = ConnectOptions(
            tuple(opts.cassandra.hosts),
            opts.cassandra.port,
            _consistency(opts.cassandra.consistency),
            opts.cassandra.request_timeout_s,
            opts.cassandra.connect_timeout_s,
            opts.cassandra.local_dc or None,
            credentials=opts.cassandra.credentials,
        )
        target = DeleteTarget(connect, ks, ctx.job.delete_concurrency)
        rep.partitions_deleted = delete_partitions(ctx.spark, target, list(deletes.rows))
        rep.rows_deleted = sum(deletes.rows.values())
        log.note(f"{rep.partitions_deleted} partition(s), {rep.rows_deleted} row(s)")

    with st.stage("summary") as log:
        touched = {(m.table, m.bucket) for m in plan.moves} | set(plan.converge)
        rest: list[PartitionSize] = []
        for scan in scans.values():
            keep = ~sf.col("dropped") & sf.col("role").isin(Role.CURRENT, Role.STALE)
            mine = sorted(b for t, b in touched if t == scan.spec.name)
            if mine:
                keep = keep & ~sf.col("bucket").isin(mine)
            rest += largest(scan.pstats.filter(keep), ctx.job.top_partitions)
            scan.pstats.unpersist()
        rep.largest_after = _top([*rest, *after], ctx.job.top_partitions)
        log.note(f"largest partition now {rep.largest_after[0].rows if rep.largest_after else 0} row(s)")


def _total(df: DataFrame, column: str) -> int:
    row = df.agg(sf.coalesce(sf.sum(column), sf.lit(0))).first()
    return 0 if row is None else int(row[0])


def _consistency(name: str) -> int:
    from cassandra import ConsistencyLevel

    return int(getattr(ConsistencyLevel, name.upper()))


def _scan_keys(ctx: Context, flags: RowFlags, deletes: Deletes) -> None:
    """Key partitions holding nothing live and something that would stay on disk long: deleted whole."""
    keys = classify(scan_keys(ctx.spark, ctx.archive.cassandra.keyspace), flags)
    f = sf.col(FLAGS)
    per_key = keys.groupBy("key").agg(
        sf.count(sf.lit(1)).alias("rows"),
        sf.sum(live_column(f).cast("long")).alias("live"),
        sf.sum(stranded_column(f).cast("long")).alias("stranded"),
    )
    ctx.report.rows_scanned[KEYS] = _total(per_key, "rows")
    for r in per_key.filter((sf.col("live") == 0) & (sf.col("stranded") > 0)).collect():
        deletes.add((KEYS, (bytes(r["key"]),)), int(r["rows"]))


def _keys_of(scan: Scan, buckets: Sequence[int], roles: Sequence[str]) -> list[tuple[object, ...]]:
    """Partition keys present at extract time in ``buckets`` with one of ``roles``."""
    rows = (
        scan.pstats.filter(sf.col("bucket").isin(list(buckets)) & sf.col("role").isin(list(roles)))
        .select("bucket", "shard", "ptopic")
        .collect()
    )
    if scan.spec.topic_in_key:
        return sorted({(bytes(r["ptopic"]), int(r["bucket"]), int(r["shard"])) for r in rows})
    return sorted({(int(r["bucket"]), int(r["shard"])) for r in rows})


def _copy_moves(ctx: Context, scan: Scan, plan: Plan, flags: RowFlags) -> int:
    """Write the live rows of every moved bucket of ``scan``'s table into its new generation."""
    moves = {m.bucket: m.target for m in plan.moves if m.table == scan.spec.name}
    if not moves:
        return 0
    keys = _keys_of(scan, sorted(moves), (Role.CURRENT, Role.STALE))
    if not keys:
        return 0
    rows = rows_of(
        ctx.spark, ctx.archive.cassandra.keyspace, scan.spec, key_frame(ctx.spark, scan.spec, keys)
    )
    out = copies(rows, flags, moves).persist()
    try:
        count = out.count()
        write_copies(out, ctx.archive.cassandra.keyspace, scan.spec)
    finally:
        out.unpersist()
    return count


def _all_keys(
    ctx: Context, scan: Scan, plan: ShardPlan, buckets: Sequence[int]
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """(older, current) partition keys of ``buckets`` under ``plan``: every shard readers merge."""
    spec = scan.spec
    old: list[tuple[object, ...]] = []
    cur: list[tuple[object, ...]] = []
    topics: dict[int, set[bytes]] = {b: set() for b in buckets}
    if spec.topic_in_key:
        for day, topic in topics_of_days(ctx.spark, ctx.archive.cassandra.keyspace, buckets):
            topics[day].add(topic)
        for key in _keys_of(scan, buckets, (Role.CURRENT, Role.STALE)):
            ptopic, pday = key[0], key[1]
            assert isinstance(ptopic, bytes) and isinstance(pday, int)
            topics[pday].add(ptopic)
    for bucket in buckets:
        current = set(plan.current_shards(bucket))
        for shard in plan.all_shards(bucket):
            dest = cur if shard in current else old
            if spec.topic_in_key:
                dest += [(t, bucket, shard) for t in sorted(topics[bucket])]
            else:
                dest.append((bucket, shard))
    return old, cur


def _converge(
    ctx: Context, scan: Scan, plan: ShardPlan, buckets: Sequence[int], flags: RowFlags, deletes: Deletes
) -> tuple[int, list[PartitionSize]]:
    """Copy what the older generations of ``buckets`` hold live and the current one lacks; verify; then
    schedule the older partitions for deletion. Returns rows copied and the current partitions' sizes."""
    spark, ks, spec = ctx.spark, ctx.archive.cassandra.keyspace, scan.spec
    old_keys, cur_keys = _all_keys(ctx, scan, plan, buckets)
    old = classify(meta_of(spark, ks, spec, key_frame(spark, spec, old_keys)), flags).persist()
    try:
        live_old = old.filter(live_column(sf.col(FLAGS)))
        current = meta_of(spark, ks, spec, key_frame(spark, spec, cur_keys))
        need = missing(live_old, current).select("bucket", "shard", "ptopic", "hash").persist()
        copied = 0
        if need.count():
            src = need.select("bucket", "shard", "ptopic").distinct().collect()
            src_keys = [_deletion(spec, int(r["bucket"]), int(r["shard"]), r["ptopic"])[1] for r in src]
            rows = rows_of(spark, ks, spec, key_frame(spark, spec, src_keys))
            rows = rows.join(need.select("bucket", "hash").distinct(), ["bucket", "hash"], "left_semi")
            out = copies(rows, flags, {b: plan.current(b) for b in buckets}).persist()
            copied = out.count()
            write_copies(out, ks, spec)
            out.unpersist()
            current = meta_of(spark, ks, spec, key_frame(spark, spec, cur_keys))
            still = missing(live_old, current).count()
            if still:
                raise CopyIncomplete(
                    f"{spec.name}: {still} row(s) of older generations missing after the copy"
                )
        need.unpersist()
        held = old.groupBy("bucket", "shard", "ptopic").agg(sf.count(sf.lit(1)).alias("rows")).collect()
        for r in held:
            deletes.add(_deletion(spec, int(r["bucket"]), int(r["shard"]), r["ptopic"]), int(r["rows"]))
        return copied, _sizes(current, spec.name)
    finally:
        old.unpersist()
