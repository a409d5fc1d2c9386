"""The send service's ownership on the real Cassandra node (127.0.0.1:9042, keyspace
``mmt_send_cassandra_<pid>``, dropped at the end; the node itself is shared and never touched): leases by
lightweight transactions, the outbox and its change log in Cassandra tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.send.send_support import Mesh
from tests.integration.send.test_send_ownership import two_replicas_then_takeover
from tools.cassandra import ctl

pytestmark = pytest.mark.cassandra
cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace


async def test_two_replicas_on_cassandra_send_once_and_take_over(
    mesh: Mesh, tmp_path: Path, cassandra_node: ctl.NodeConfig, cassandra_keyspace: str
) -> None:
    await two_replicas_then_takeover(
        mesh,
        tmp_path / "unused.db",
        MSGSTORE_BACKEND="cassandra",
        MSGSTORE_CASSANDRA_HOSTS=cassandra_node.host,
        MSGSTORE_CASSANDRA_PORT=str(cassandra_node.native_port),
        MSGSTORE_CASSANDRA_KEYSPACE=cassandra_keyspace,
        MSGSTORE_CASSANDRA_REQUEST_TIMEOUT_SECONDS="30",
    )
