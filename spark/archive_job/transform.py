"""Transform: classify rows, size partitions, pick the copies a move or a convergence writes.

Everything that decides *where* a row lives calls :mod:`archivestore.cassandra.layout` from Python UDFs
(``shard_of`` for a copy's shard, ``ShardPlan`` for a partition's role), so the job can never disagree with
the adapter's writers and readers. What the job *keeps* is decided by :mod:`.rows` (the adapter's
``visible`` plus this run's cutoffs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf
from pyspark.sql.types import IntegerType, StringType

from archivestore.cassandra.layout import Generation, ShardPlan, shard_of
from spark.archive_job.decide import BucketStats, Role, role_of
from spark.archive_job.rows import RowFlags, doomed_column, live_column, stranded_column
from spark.archive_job.tables import TableSpec, generation_of

__all__ = [
    "PartitionSize",
    "bucket_stats",
    "classify",
    "copies",
    "largest",
    "missing",
    "partition_stats",
    "table_columns",
]

FLAGS = "flags"


@dataclass(frozen=True)
class PartitionSize:
    """One partition's size for the report."""

    table: str
    bucket: int
    shard: int
    topic: str | None  # hex, topic-table partitions only
    rows: int
    bytes: int

    def as_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "table": self.table,
            "bucket": self.bucket,
            "shard": self.shard,
            "topic": self.topic,
            "rows": self.rows,
            "bytes": self.bytes,
        }


def classify(df: DataFrame, flags: RowFlags) -> DataFrame:
    """Add the ``flags`` column (:func:`spark.archive_job.rows.row_flags`) to rows with the meta columns."""
    udf = sf.udf(flags, IntegerType())
    return df.withColumn(FLAGS, udf("sent", "topic", "hash", "expires_at", "wt", "ttl"))


def partition_stats(classified: DataFrame, table: str, plan: ShardPlan, expire: bool) -> DataFrame:
    """Per partition: rows, bytes, live rows and bytes, stranded and doomed rows, role, and ``dropped``.

    A partition is *dropped* (deleted whole) when an expiry leaves nothing live in it and it held at least
    one row this expiry removes: the case the data model deletes by partition (and that the store's own
    ``expire`` deletes too).
    """
    flags = sf.col(FLAGS)
    size = sf.coalesce(sf.col("size"), sf.lit(0)).cast("long")
    live, stranded, doomed = live_column(flags), stranded_column(flags), doomed_column(flags)
    agg = classified.groupBy("bucket", "shard", "ptopic").agg(
        sf.count(sf.lit(1)).alias("rows"),
        sf.sum(size).alias("bytes"),
        sf.sum(live.cast("long")).alias("live"),
        sf.sum(sf.when(live, size).otherwise(0)).alias("live_bytes"),
        sf.sum(stranded.cast("long")).alias("stranded"),
        sf.sum(doomed.cast("long")).alias("doomed"),
    )
    role = sf.udf(lambda bucket, shard: role_of(plan, bucket, shard), StringType())
    agg = agg.withColumn("role", role("bucket", "shard")).withColumn("table", sf.lit(table))
    reachable = sf.col("role").isin(Role.CURRENT, Role.STALE)
    dropped = sf.lit(expire) & (sf.col("live") == 0) & (sf.col("doomed") > 0) & reachable
    return agg.withColumn("dropped", dropped)


def bucket_stats(table: str, pstats: DataFrame) -> list[BucketStats]:
    """Collect one :class:`BucketStats` per bucket (buckets are few: hours and days, not rows)."""
    role, dropped = sf.col("role"), sf.col("dropped")
    current = (role == Role.CURRENT) & ~dropped
    stale = (role == Role.STALE) & ~dropped

    def total(cond: Column, column: str) -> Column:
        return sf.coalesce(sf.sum(sf.when(cond, sf.col(column))), sf.lit(0))

    rows = (
        pstats.withColumn("one", sf.lit(1))
        .groupBy("bucket")
        .agg(
            sf.sum("rows").alias("rows"),
            sf.coalesce(sf.max(sf.when(current, sf.col("rows"))), sf.lit(0)).alias("current_max_rows"),
            sf.coalesce(sf.max(sf.when(current, sf.col("bytes"))), sf.lit(0)).alias("current_max_bytes"),
            total(current, "stranded").alias("current_stranded"),
            total(current | stale, "live").alias("live_rows"),
            total(current | stale, "live_bytes").alias("live_bytes"),
            total(stale, "rows").alias("stale_rows"),
            sf.max("shard").alias("max_shard"),
            total((role == Role.CURRENT) & dropped, "one").alias("current_dropped"),
        )
    )
    return [
        BucketStats(
            table,
            int(r["bucket"]),
            int(r["rows"]),
            int(r["current_max_rows"]),
            int(r["current_max_bytes"]),
            int(r["current_stranded"]),
            int(r["live_rows"]),
            int(r["live_bytes"]),
            int(r["stale_rows"]),
            generation_of(int(r["max_shard"])),
            int(r["current_dropped"]),
        )
        for r in rows.collect()
    ]


def largest(pstats: DataFrame, n: int) -> list[PartitionSize]:
    """The ``n`` partitions with the most rows (then bytes)."""
    top = pstats.orderBy(sf.col("rows").desc(), sf.col("bytes").desc()).limit(n).collect()
    return [
        PartitionSize(
            str(r["table"]),
            int(r["bucket"]),
            int(r["shard"]),
            None if r["ptopic"] is None else bytes(r["ptopic"]).hex(),
            int(r["rows"]),
            int(r["bytes"] or 0),
        )
        for r in top
    ]


def copies(rows: DataFrame, flags: RowFlags, targets: Mapping[int, Generation]) -> DataFrame:
    """The rows a move or convergence writes: live ones, one per hash (the latest write), re-sharded.

    ``targets`` maps each bucket to the generation its rows go to; the new shard is
    ``archivestore.cassandra.layout.shard_of(generation, shards, hash)``, exactly what the adapter's
    writers compute.
    """
    live = classify(rows, flags).filter(live_column(sf.col(FLAGS)))
    latest = Window.partitionBy("bucket", "hash").orderBy(sf.col("wt").desc_nulls_last())
    unique = live.withColumn("_n", sf.row_number().over(latest)).filter(sf.col("_n") == 1).drop("_n", FLAGS)
    table = dict(targets)

    def shard(bucket: int, hash_: bytearray) -> int:
        target = table[bucket]
        return shard_of(target.generation, target.shards, bytes(hash_))

    return unique.withColumn("shard", sf.udf(shard, IntegerType())("bucket", "hash"))


def missing(source: DataFrame, target: DataFrame) -> DataFrame:
    """Rows of ``source`` whose hash is in none of ``target``'s rows of the same bucket."""
    present = target.select("bucket", "hash").distinct()
    return source.join(present, ["bucket", "hash"], "left_anti")


def table_columns(df: DataFrame, spec: TableSpec) -> DataFrame:
    """Normalised rows as the table's columns, plus ``ttl`` and ``wt`` for the connector's per-row options."""
    named = [sf.col("bucket").alias("day") if c == "day" else sf.col(c) for c in spec.columns]
    return df.select(*named, "ttl", "wt")
