"""The messaging store contract bound to the Cassandra backend, on the real local node.

One keyspace serves the module (``mmt_msgstore_cassandra_<pid>``, dropped at the end; the node itself is
shared and never touched); every test starts from empty tables (TRUNCATE).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from msgstore.cassandra.schema import DATA_TABLES
from msgstore.cassandra.store import CassandraMsgStore
from msgstore.config import StoreConfig
from msgstore.errors import StoreUnavailable
from msgstore.factory import create_store
from msgstore.protocol import MsgStore
from msgstore.settings import StoreSettings
from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.msgstore.contract import SETTINGS, MsgStoreContract, StoreFactory
from tools.cassandra import ctl

pytestmark = pytest.mark.cassandra

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace


def _empty(admin: Any, keyspace: str) -> None:
    existing = {
        row[0]
        for row in cf.admin_execute(
            admin, "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
        )
    }
    for future in [admin.execute_async(f"TRUNCATE {keyspace}.{t}") for t in DATA_TABLES if t in existing]:
        future.result()


class TestCassandraContract(MsgStoreContract):
    """Every contract test against the module's keyspace, emptied before each test."""

    @pytest.fixture
    async def make_store(
        self, cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
    ) -> AsyncIterator[StoreFactory]:
        """Open CassandraMsgStores on the module keyspace; all are closed at teardown."""
        _empty(cassandra_admin, cassandra_keyspace)
        opened: list[CassandraMsgStore] = []

        async def factory(settings: StoreSettings = SETTINGS) -> MsgStore:
            store = CassandraMsgStore(
                [cassandra_node.host],
                cassandra_node.native_port,
                cassandra_keyspace,
                settings,
                request_timeout=30.0,
            )
            await store.open()
            opened.append(store)
            return store

        yield factory
        for store in opened:
            await store.close()


async def test_factory_builds_a_cassandra_store(
    cassandra_node: ctl.NodeConfig, cassandra_keyspace: str
) -> None:
    config = StoreConfig.from_env(
        {
            "MSGSTORE_BACKEND": "cassandra",
            "MSGSTORE_CASSANDRA_HOSTS": cassandra_node.host,
            "MSGSTORE_CASSANDRA_PORT": str(cassandra_node.native_port),
            "MSGSTORE_CASSANDRA_KEYSPACE": cassandra_keyspace,
        }
    )
    store = create_store(config)
    assert store.backend == "cassandra"
    with pytest.raises(StoreUnavailable):
        _ = store.outbox  # not open yet
    await store.open()
    try:
        assert store.outbox.shards == 16 and await store.records.head() >= 0
    finally:
        await store.close()


async def test_an_unreachable_node_is_unavailable() -> None:
    store = CassandraMsgStore(["127.0.0.1"], 1, "mmt_nowhere", SETTINGS, connect_timeout=1.0)
    with pytest.raises(StoreUnavailable):
        await store.open()
