"""Load: write copies through the connector, delete partitions from the executors.

Copies keep each row's write time (``writetime`` option from the ``wt`` column) and remaining TTL (``ttl``
option; none when the row had none). Keeping the write time is what makes a copy exactly the original for
readers: an erasure hides rows written before it, and a copy stamped "now" would escape every erasure
recorded while the job ran. It also means a copy must never land in a partition that was deleted after the
original was written (the delete's tombstone would shadow it), which is why moves always write into a
fresh generation and the job never deletes a partition it later writes into.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from spark.archive_job.executor import DeleteTarget, Deletion, partition_deleter
from spark.archive_job.extract import CASSANDRA_FORMAT
from spark.archive_job.tables import TableSpec
from spark.archive_job.transform import table_columns

__all__ = ["delete_partitions", "write_copies"]

#: Partitions per delete task: large enough to amortise a task's driver session, small enough to spread.
DELETES_PER_TASK = 2000


def write_copies(df: DataFrame, keyspace: str, spec: TableSpec) -> None:
    """Upsert normalised rows into ``spec``'s table with their original write time and remaining TTL."""
    options = {"keyspace": keyspace, "table": spec.name, "ttl": "ttl", "writetime": "wt"}
    table_columns(df, spec).write.format(CASSANDRA_FORMAT).mode("append").options(**options).save()


def delete_partitions(spark: SparkSession, target: DeleteTarget, items: Sequence[Deletion]) -> int:
    """Delete whole partitions on the executors (``foreachPartition``); returns how many were deleted."""
    unique = sorted(set(items), key=repr)
    if not unique:
        return 0
    sc = spark.sparkContext
    counter = sc.accumulator(0)
    tasks = min(len(unique), max(sc.defaultParallelism, -(-len(unique) // DELETES_PER_TASK)))
    sc.parallelize(unique, tasks).foreachPartition(partition_deleter(target, counter))
    return int(counter.value)
