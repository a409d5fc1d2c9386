"""The one place a :class:`~archivestore.config.StoreConfig` becomes a storage adapter.

The archive service, the Spark job, the benchmarks and the tests all build their store here, so an adapter is
constructed the same way everywhere and nothing outside ``archivestore`` (and the archive service's wiring)
names a backend module. Drivers are imported only for the backend asked for: a SQLite deployment never loads
cassandra-driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from archivestore.config import StoreConfig
from archivestore.protocol import ArchiveStore
from archivestore.types import TIME_TABLE, TOPIC_TABLE

__all__ = ["create_store", "open_store"]


def create_store(config: StoreConfig) -> ArchiveStore:
    """The adapter ``config`` asks for, not yet opened (the caller opens it, e.g. with retries).

    SQLite: the file's directory is created if missing (an unwritable place fails at ``open()`` instead, as
    :class:`~archivestore.errors.StoreUnavailable`).
    """
    if config.backend == "sqlite":
        from archivestore.sqlite.store import SqliteStore

        with contextlib.suppress(OSError):
            config.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteStore(
            config.sqlite_path,
            config.retention,
            bucket_seconds=config.bucket_seconds,
            bloom_topic_expansion=config.bloom_topic_expansion,
            read_connections=config.sqlite_read_connections,
            busy_timeout_ms=int(config.sqlite_busy_timeout_s * 1000),
            cache_mib=config.sqlite_cache_mib,
            group_commit_rows=config.sqlite_group_commit_rows,
        )
    from cassandra import ConsistencyLevel

    from archivestore.cassandra.store import CassandraStore

    cassandra = config.cassandra
    return CassandraStore(
        list(cassandra.hosts),
        cassandra.port,
        cassandra.keyspace,
        config.retention,
        consistency=getattr(ConsistencyLevel, cassandra.consistency),
        bucket_seconds=config.bucket_seconds,
        default_shards={TIME_TABLE: config.default_shards.time, TOPIC_TABLE: config.default_shards.topic},
        max_in_flight=cassandra.max_in_flight,
        request_timeout=cassandra.request_timeout_s,
        connect_timeout=cassandra.connect_timeout_s,
        replication=cassandra.replication,
        local_dc=cassandra.local_dc or None,
        bloom_topic_expansion=config.bloom_topic_expansion,
        write_batch_bytes=config.cassandra_write_batch_bytes,
        credentials=cassandra.credentials,
    )


@contextlib.asynccontextmanager
async def open_store(config: StoreConfig) -> AsyncIterator[ArchiveStore]:
    """``async with open_store(config) as store:`` — created, opened (schema migrated), closed on exit."""
    store = create_store(config)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
