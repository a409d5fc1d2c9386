"""The stages of a run on the SQLite archive.

SQLite has no physical partitions: buckets are virtual (``sent // ARCHIVE_BUCKET_SECONDS`` for the time
table, ``(topic, sent // 86400)`` for the topic table; docs/archive.md "SQLite"), so there is nothing to
split, and a delete makes no tombstones. The job still reads the whole file in Spark (executors, sqlite3),
reports the same sizes and plan as on Cassandra, and expires through the store:

1. **extract** every envelope's small columns; classify (visible, past this run's cutoffs);
2. **plan**    time buckets in which nothing stays (deleted whole) and oversized virtual buckets (reported);
3. **delete**  (expire) ``delete_buckets`` on the emptied buckets, a few per transaction so ingest keeps
              getting the write lock between them;
4. **erase**   (expire) the store's ``expire`` for the rest: the rows past a cutoff in buckets that keep
              live rows (row deletes are what SQLite does; there are no tombstones to fear);
5. **summary** largest virtual partitions after the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from archivestore.retention import DAY_S
from archivestore.types import TIME_TABLE, TOPIC_TABLE, BucketInfo, ExpireRequest
from archivestore.visibility import Erasures
from spark.archive_job.context import Context
from spark.archive_job.extract import sqlite_meta
from spark.archive_job.rows import doomed_column, live_column, row_flags
from spark.archive_job.transform import FLAGS, PartitionSize, classify

__all__ = ["STAGES", "run", "stages"]

STAGES = ("extract", "plan", "delete", "erase", "summary")


def stages(expire: bool, dry: bool) -> tuple[str, ...]:
    """The stages a run goes through."""
    if dry:
        return STAGES[:2]
    return STAGES if expire else ("extract", "plan", "summary")


#: Oversized partitions listed per table in the plan (the largest first).
PLAN_LINES = 100
#: The archive file's one table, as the report names it.
ENVELOPES = "envelopes"


@dataclass(frozen=True)
class VirtualBucket:
    """One time bucket's counts."""

    bucket: int
    rows: int
    bytes: int
    live: int
    doomed: int


def _virtual(classified: DataFrame, bucket_seconds: int) -> tuple[DataFrame, DataFrame]:
    """Per-row frames keyed like the Cassandra tables: (time bucket) and (topic, day)."""
    # The virtual buckets the SQLite adapter's list_buckets reports: sent // width (sent is never negative).
    time_rows = classified.withColumn("bucket", sf.expr(f"sent div {bucket_seconds}"))
    topic_rows = classified.withColumn("bucket", sf.expr(f"sent div {DAY_S}"))
    return time_rows, topic_rows


def _sizes(
    rows: DataFrame, table: str, by_topic: bool, n: int, over: tuple[int, int] | None = None
) -> list[PartitionSize]:
    """The ``n`` largest virtual partitions (only those above ``over = (rows, bytes)`` when given)."""
    keys = ["topic", "bucket"] if by_topic else ["bucket"]
    sized = rows.groupBy(*keys).agg(sf.count(sf.lit(1)).alias("rows"), sf.sum("size").alias("bytes"))
    if over is not None:
        sized = sized.filter((sf.col("rows") > over[0]) | (sf.col("bytes") > over[1]))
    top = sized.orderBy(sf.col("rows").desc(), sf.col("bytes").desc()).limit(n).collect()
    return [
        PartitionSize(
            table,
            int(r["bucket"]),
            0,
            bytes(r["topic"]).hex() if by_topic else None,
            int(r["rows"]),
            int(r["bytes"]),
        )
        for r in top
    ]


def _top(parts: list[PartitionSize], n: int) -> list[PartitionSize]:
    return sorted(parts, key=lambda p: (-p.rows, -p.bytes, p.table, p.bucket))[:n]


def run(ctx: Context) -> None:
    """Run every stage (stops after ``plan`` when dry)."""
    policy, cutoffs, rep, st, n = ctx.policy, ctx.cutoffs, ctx.report, ctx.stages, ctx.job.top_partitions
    width = ctx.archive.bucket_seconds

    with st.stage("extract") as log:
        meta = sqlite_meta(ctx.spark, ctx.archive.sqlite_path, ctx.job.sqlite_slices, width)
        meta = meta.withColumn("wt", sf.lit(None).cast("long")).withColumn("ttl", sf.lit(None).cast("int"))
        # No erasures and no TTLs on SQLite: visible is `expires_at` alone, as the adapter's VISIBLE clause.
        flags = row_flags(ctx.now, Erasures(), cutoffs, 0)
        classified = classify(meta, flags).persist()
        time_rows, topic_rows = _virtual(classified, width)
        f = sf.col(FLAGS)
        per_bucket = time_rows.groupBy("bucket").agg(
            sf.count(sf.lit(1)).alias("rows"),
            sf.sum("size").alias("bytes"),
            sf.sum(live_column(f).cast("long")).alias("live"),
            sf.sum(doomed_column(f).cast("long")).alias("doomed"),
        )
        buckets = [
            VirtualBucket(int(r["bucket"]), int(r["rows"]), int(r["bytes"]), int(r["live"]), int(r["doomed"]))
            for r in per_bucket.collect()
        ]
        rep.rows_scanned[ENVELOPES] = sum(b.rows for b in buckets)
        rep.envelopes_expired = sum(b.doomed for b in buckets)
        rep.largest_before = _top(
            [*_sizes(time_rows, TIME_TABLE, False, n), *_sizes(topic_rows, TOPIC_TABLE, True, n)], n
        )
        log.note(f"{rep.rows_scanned[ENVELOPES]} rows in {len(buckets)} bucket(s)")

    with st.stage("plan") as log:
        emptied = sorted(
            (b for b in buckets if policy.expire and b.live == 0 and b.doomed > 0), key=lambda b: b.bucket
        )
        over = (policy.max_rows, policy.max_bytes)
        oversized = (
            [
                *_sizes(time_rows, TIME_TABLE, False, PLAN_LINES, over),
                *_sizes(topic_rows, TOPIC_TABLE, True, PLAN_LINES, over),
            ]
            if policy.split
            else []
        )
        rep.plan = [
            f"delete {len(emptied)} expired time bucket(s) whole, then expire "
            f"{rep.envelopes_expired - sum(b.doomed for b in emptied)} envelope(s) from the other buckets",
            *(
                f"  oversized {p.table} bucket {p.bucket}{'' if p.topic is None else ' topic ' + p.topic}: "
                f"{p.rows} rows, {p.bytes} bytes (SQLite buckets are virtual: nothing to split)"
                for p in oversized
            ),
        ]
        for line in rep.plan:
            st.say(line)
        log.note(f"{len(emptied)} bucket(s) to delete, {len(oversized)} oversized listed")
    if ctx.dry:
        classified.unpersist()
        return

    if policy.expire:
        assert cutoffs is not None
        with st.stage("delete") as log:
            batch = ctx.job.sqlite_delete_batch
            for start in range(0, len(emptied), batch):
                infos = [
                    BucketInfo(TIME_TABLE, b.bucket, 0, b.rows, b.bytes)
                    for b in emptied[start : start + batch]
                ]
                rep.partitions_deleted += ctx.store.delete_buckets(infos)
            rep.rows_deleted = sum(b.rows for b in emptied)
            log.note(f"{rep.partitions_deleted} bucket(s), {rep.rows_deleted} row(s)")
        with st.stage("erase") as log:
            result = ctx.store.expire(ExpireRequest(cutoffs.cutoff, dict(cutoffs.per_topic)), ctx.now)
            rep.rows_deleted += result.envelopes
            log.note(f"store expire: {result.envelopes} envelope(s) in {result.partitions} bucket(s)")

    with st.stage("summary") as log:
        keep = sf.lit(True)
        if policy.expire:
            keep = ~doomed_column(sf.col(FLAGS))
            if emptied:
                keep = keep & ~sf.expr(f"sent div {width}").isin([b.bucket for b in emptied])
        rep.largest_after = _top(
            [
                *_sizes(time_rows.filter(keep), TIME_TABLE, False, n),
                *_sizes(topic_rows.filter(keep), TOPIC_TABLE, True, n),
            ],
            n,
        )
        classified.unpersist()
        log.note(f"largest partition now {rep.largest_after[0].rows if rep.largest_after else 0} row(s)")
