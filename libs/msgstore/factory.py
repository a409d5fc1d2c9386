"""The one place a :class:`~msgstore.config.StoreConfig` becomes a Messaging API store.

The send and subscription services, the benchmarks and the tests build their store here, so nothing outside
``msgstore`` names a backend module; the driver is imported only for the backend asked for.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from msgstore.config import StoreConfig
from msgstore.protocol import MsgStore
from msgstore.settings import StoreSettings

__all__ = ["create_store", "open_store", "settings_of"]


def settings_of(config: StoreConfig) -> StoreSettings:
    """The backend-neutral data-model settings of ``config``."""
    return StoreSettings(
        shards=config.outbox_shards,
        outbox_retention=config.outbox_retention_s,
        change_retention=config.change_retention_s,
        record_retention=config.record_retention_s,
        record_bucket=config.record_bucket_s,
        event_retention=config.event_retention_s,
        lease_margin=config.lease_margin_s,
    )


def create_store(config: StoreConfig) -> MsgStore:
    """The store ``config`` asks for, not yet opened."""
    settings = settings_of(config)
    if config.backend == "sqlite":
        from msgstore.sqlite.store import SqliteMsgStore

        with contextlib.suppress(OSError):
            config.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteMsgStore(
            config.sqlite_path, settings, busy_timeout_ms=int(config.sqlite_busy_timeout_s * 1000)
        )
    from msgstore.cassandra.store import CassandraMsgStore

    cassandra = config.cassandra
    return CassandraMsgStore(
        list(cassandra.hosts),
        cassandra.port,
        cassandra.keyspace,
        settings,
        consistency=cassandra.consistency,
        local_dc=cassandra.local_dc or None,
        replication=cassandra.replication,
        request_timeout=cassandra.request_timeout_s,
        connect_timeout=cassandra.connect_timeout_s,
        max_in_flight=cassandra.max_in_flight,
        credentials=cassandra.credentials,
    )


@contextlib.asynccontextmanager
async def open_store(config: StoreConfig) -> AsyncIterator[MsgStore]:
    """``async with open_store(config) as store:`` — created, opened, closed on exit."""
    store = create_store(config)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
