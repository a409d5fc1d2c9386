"""Whole-partition deletes, run on the executors with the Python driver
(docs/cassandra.md "Sources: Spark connector").

The connector's DataFrame API cannot delete, so each Spark task opens its own driver session (built by
:func:`dbkit.cassandra.cluster.build_cluster`, as the archive adapter's: same protocol, load balancing,
consistency and timeouts as the archive), prepares the three partition deletes and runs its share
concurrently. Only ever a partition key: no row or range tombstone is written into an envelope partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from cassandra.concurrent import execute_concurrent_with_args

from archivestore.cassandra.schema import KEYS_TABLE, TIME_TABLE, TOPIC_TABLE
from dbkit.cassandra.cluster import ConnectOptions, build_cluster

__all__ = ["DeleteTarget", "Deletion", "delete_statements", "partition_deleter"]

#: One partition to delete: ``(table, key values)`` with the key in CQL order.
Deletion = tuple[str, tuple[Any, ...]]


def delete_statements(keyspace: str) -> dict[str, str]:
    """The whole-partition DELETE of each table the job deletes from (keyed by table name)."""
    return {
        TIME_TABLE: f"DELETE FROM {keyspace}.{TIME_TABLE} WHERE bucket = ? AND shard = ?",
        TOPIC_TABLE: f"DELETE FROM {keyspace}.{TOPIC_TABLE} WHERE topic = ? AND day = ? AND shard = ?",
        KEYS_TABLE: f"DELETE FROM {keyspace}.{KEYS_TABLE} WHERE key = ?",
    }


@dataclass(frozen=True)
class DeleteTarget:
    """Where and how the executors delete (picklable: it travels to every task)."""

    connect: ConnectOptions
    keyspace: str
    concurrency: int = 32


def partition_deleter(target: DeleteTarget, counter: Any) -> Callable[[Iterable[Deletion]], None]:
    """The ``foreachPartition`` function: delete this task's partitions, add the count to ``counter``."""

    def run(items: Iterable[Deletion]) -> None:
        batch = sorted(items, key=lambda item: item[0])
        if not batch:
            return
        cluster = build_cluster(target.connect)
        try:
            session = cluster.connect()
            texts = delete_statements(target.keyspace)
            for table, group in groupby(batch, key=lambda item: item[0]):
                stmt = session.prepare(texts[table])
                stmt.is_idempotent = True  # a partition delete may be retried safely
                keys = [key for _, key in group]
                # raise_on_first_error: a failed task fails the stage, and the whole run (re-run it).
                execute_concurrent_with_args(session, stmt, keys, concurrency=target.concurrency)
                counter.add(len(keys))
        finally:
            cluster.shutdown()

    return run
