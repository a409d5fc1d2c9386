"""Extract: read the archive into DataFrames, Cassandra through the connector and SQLite through sqlite3.

Cassandra reads come in two shapes: a full scan of a table's small columns (``scan_meta``: keys, order,
topic, expiry, size, write time and TTL of ``raw``, never the envelope bytes) and reads of chosen
partitions (``meta_of``, ``rows_of``), which the connector runs as a direct join: one single-partition
query per key instead of a scan. Every frame of a sharded table comes out normalised (:mod:`.tables`).

SQLite is read by the executors: the sent-time range is cut into slices and each task opens the file
read-only with Python's ``sqlite3`` (docs/cassandra.md "Sources: Spark connector") and streams its slice's
small columns.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from spark.archive_job.tables import KEYS, TOPICS_CATALOGUE, TableSpec

__all__ = [
    "CASSANDRA_FORMAT",
    "META_COLUMNS",
    "ROW_COLUMNS",
    "key_frame",
    "meta_of",
    "rows_of",
    "scan_keys",
    "scan_meta",
    "sqlite_meta",
    "topics_of_days",
]

CASSANDRA_FORMAT = "org.apache.spark.sql.cassandra"
#: Normalised small columns of a sharded table (``ptopic``: the topic in the partition key, or null).
META_COLUMNS = ("bucket", "shard", "ptopic", "sent", "hash", "topic", "expires_at", "size", "wt", "ttl")
#: Normalised whole rows: the envelope bytes and every column a copy writes.
ROW_COLUMNS = (*META_COLUMNS[:6], "expiry", "raw", "message_hash", *META_COLUMNS[6:])
#: The partition-key frame of each table for a direct join (types as in the CQL schema).
_KEY_SCHEMA = {
    False: StructType([StructField("bucket", LongType(), False), StructField("shard", IntegerType(), False)]),
    True: StructType(
        [
            StructField("topic", BinaryType(), False),
            StructField("day", LongType(), False),
            StructField("shard", IntegerType(), False),
        ]
    ),
}


def _table(spark: SparkSession, keyspace: str, table: str, *, join: bool = False) -> DataFrame:
    options = {"keyspace": keyspace, "table": table}
    if join:
        options["directJoinSetting"] = "on"  # always look partitions up, never scan to join
    return spark.read.format(CASSANDRA_FORMAT).options(**options).load()


def _written(column: str) -> list[Column]:
    return [sf.expr(f"writetime({column})").alias("wt"), sf.expr(f"ttl({column})").alias("ttl")]


def _normalised(df: DataFrame, spec: TableSpec, full: bool) -> DataFrame:
    if spec.topic_in_key:
        keys = [sf.col("day").alias("bucket"), sf.col("shard"), sf.col("topic").alias("ptopic")]
    else:
        keys = [sf.col("bucket"), sf.col("shard"), sf.lit(None).cast(BinaryType()).alias("ptopic")]
    data = ["expiry", "raw", "message_hash"] if full else []
    return df.select(*keys, "sent", "hash", "topic", *data, "expires_at", "size", *_written("raw"))


def scan_meta(spark: SparkSession, keyspace: str, spec: TableSpec) -> DataFrame:
    """Every row of ``spec``'s table, small columns only (``META_COLUMNS``)."""
    return _normalised(_table(spark, keyspace, spec.name), spec, full=False)


def key_frame(spark: SparkSession, spec: TableSpec, keys: Sequence[tuple[Any, ...]]) -> DataFrame:
    """A frame of partition keys of ``spec``'s table (``(bucket, shard)`` or ``(topic, day, shard)``)."""
    return spark.createDataFrame(list(keys), _KEY_SCHEMA[spec.topic_in_key])


def meta_of(spark: SparkSession, keyspace: str, spec: TableSpec, keys: DataFrame) -> DataFrame:
    """The small columns of the rows in the given partitions (direct join)."""
    joined = keys.join(_table(spark, keyspace, spec.name, join=True), list(spec.key_columns))
    return _normalised(joined, spec, full=False)


def rows_of(spark: SparkSession, keyspace: str, spec: TableSpec, keys: DataFrame) -> DataFrame:
    """Whole rows (``ROW_COLUMNS``: raw bytes, write time, TTL) of the given partitions (direct join)."""
    joined = keys.join(_table(spark, keyspace, spec.name, join=True), list(spec.key_columns))
    return _normalised(joined, spec, full=True)


def scan_keys(spark: SparkSession, keyspace: str) -> DataFrame:
    """Every ``envelope_keys`` row: key, sent, envelope hash (as ``hash``), topic, expiry, write time, TTL."""
    df = _table(spark, keyspace, KEYS)
    return df.select(
        "key",
        "sent",
        sf.col("envelope_hash").alias("hash"),
        "topic",
        "expires_at",
        *_written("kind"),
    )


def topics_of_days(spark: SparkSession, keyspace: str, days: Sequence[int]) -> list[tuple[int, bytes]]:
    """``(day, topic)`` pairs the topic catalogue lists for ``days`` (any retention class)."""
    if not days:
        return []
    keys = spark.createDataFrame([(d,) for d in sorted(set(days))], "day long")
    rows = keys.join(_table(spark, keyspace, TOPICS_CATALOGUE, join=True), ["day"]).select("day", "topic")
    return sorted({(int(r["day"]), bytes(r["topic"])) for r in rows.collect()})


# ---------------------------------------------------------------------------------------------- SQLite
SQLITE_SCHEMA = StructType(
    [
        StructField("sent", LongType(), False),
        StructField("hash", BinaryType(), False),
        StructField("topic", BinaryType(), False),
        StructField("expires_at", LongType(), True),
        StructField("size", IntegerType(), False),
    ]
)
#: ``length(raw)`` comes from the record header: no overflow page of the envelope bytes is read.
_SLICE_SQL = "SELECT sent, hash, topic, expires_at, length(raw) FROM envelopes WHERE sent >= ? AND sent < ?"


def _connect_ro(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0)
    conn.execute("PRAGMA query_only = 1")  # a bug here must not be able to write
    return conn


def sqlite_bounds(path: Path) -> tuple[int, int] | None:
    """``(first, last)`` sent in the file, or None when it holds no envelope."""
    conn = _connect_ro(str(path))
    try:
        lo, hi = conn.execute("SELECT min(sent), max(sent) FROM envelopes").fetchone()
    finally:
        conn.close()
    return None if lo is None else (int(lo), int(hi))


def _read_slices(path: str) -> Any:
    def read(slices: Iterator[tuple[int, int]]) -> Iterator[tuple[int, bytes, bytes, int | None, int]]:
        conn = _connect_ro(path)
        try:
            for lo, hi in slices:
                for sent, hash_, topic, expires_at, size in conn.execute(_SLICE_SQL, (lo, hi)):
                    yield int(sent), bytes(hash_), bytes(topic), expires_at, int(size)
        finally:
            conn.close()

    return read


def sqlite_meta(spark: SparkSession, path: Path, slices: int, align: int) -> DataFrame:
    """Every envelope's small columns (``sent, hash, topic, expires_at, size``), read by the executors.

    Slices are aligned to ``align`` seconds (the bucket width) so no bucket is split between tasks.
    """
    bounds = sqlite_bounds(path)
    if bounds is None:
        return spark.createDataFrame([], SQLITE_SCHEMA)
    first, last = bounds[0] // align, bounds[1] // align + 1  # in buckets, last exclusive
    step = max(1, -(-(last - first) // slices))
    ranges = [(b * align, min(b + step, last) * align) for b in range(first, last, step)]
    rdd = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(_read_slices(str(path.resolve())))
    return spark.createDataFrame(rdd, SQLITE_SCHEMA)
