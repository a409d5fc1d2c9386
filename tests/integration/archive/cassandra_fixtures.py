"""Shared fixtures for tests against the local Cassandra node (``make cassandra-start``).

The node is shared by everyone on the machine, so these fixtures never stop it, never touch its data
directory, and only ever create, truncate and drop keyspaces of their own (``mmt_<module>_<pid>``). When
the node does not answer they fail with the reason and the command that starts it; they never skip. A node
that is running but restarting (another test killed it on purpose) is waited for, within a deadline.

Use them from a test module by binding the names (pytest finds fixtures by module attribute)::

    from tests.integration.archive import cassandra_fixtures as cf

    cassandra_node = cf.cassandra_node
    cassandra_admin = cf.cassandra_admin
    cassandra_keyspace = cf.cassandra_keyspace
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from cassandra import OperationTimedOut, ProtocolVersion
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.policies import ConstantReconnectionPolicy, DCAwareRoundRobinPolicy

from archivestore.cassandra.schema import DATA_TABLES
from tools.cassandra import ctl

#: How long to wait for a node that is running but not answering yet (a colleague's test restarting it).
RESTART_WAIT_S = 240.0
START_HINT = "start it with `make cassandra-start` (make -f Makefile -f mk/cassandra.mk cassandra-start)"


def wait_for_node(cfg: ctl.NodeConfig, timeout_s: float = RESTART_WAIT_S) -> str:
    """Return the node's release version once CQL answers; fail the test (never skip) if it cannot.

    No process and a closed port fail at once; a running process is given ``timeout_s`` to answer.
    """
    pid = ctl.running_pid(cfg)
    try:
        if pid is None and not _listening(cfg):
            raise ctl.StartFailed(f"no Cassandra process and nothing listening on {cfg.endpoint}")
        return ctl.wait_ready(cfg, timeout_s=timeout_s, pid=pid)
    except ctl.StartFailed as err:
        pytest.fail(
            f"the local Cassandra node does not answer CQL on {cfg.endpoint}: {err.reason}; {START_HINT}",
            pytrace=False,
        )


def _listening(cfg: ctl.NodeConfig) -> bool:
    try:
        with socket.create_connection((cfg.host, cfg.native_port), timeout=2.0):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def cassandra_node() -> ctl.NodeConfig:
    """The local node's settings (the same CASSANDRA_* variables make used), once it answers CQL."""
    cfg = ctl.NodeConfig.from_env()
    wait_for_node(cfg)
    return cfg


@pytest.fixture(scope="module")
def cassandra_admin(cassandra_node: ctl.NodeConfig) -> Iterator[Any]:
    """A synchronous driver session for set-up and inspection (keyspaces, TRUNCATE, raw reads).

    It reconnects within a second after a node restart (fault tests restart the node mid-module).
    """
    profile = ExecutionProfile(load_balancing_policy=DCAwareRoundRobinPolicy(), request_timeout=60.0)
    cluster = Cluster(
        [cassandra_node.host],
        port=cassandra_node.native_port,
        protocol_version=ProtocolVersion.V5,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        reconnection_policy=ConstantReconnectionPolicy(1.0),
        connect_timeout=10.0,
    )
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def admin_execute(
    admin: Any, cql: str, params: Sequence[Any] = (), deadline_s: float = RESTART_WAIT_S
) -> Any:
    """Run an admin statement, retrying while the node is unreachable (restarting) up to ``deadline_s``."""
    began = time.monotonic()
    while True:
        try:
            return admin.execute(cql, params)
        except (NoHostAvailable, OperationTimedOut):
            if time.monotonic() - began > deadline_s:
                raise
            time.sleep(0.5)  # poll interval while the driver reconnects


def keyspace_name(module: str) -> str:
    """A keyspace of this module and process: ``mmt_<module>_<pid>`` (CQL identifier, ≤ 48 chars)."""
    stem = re.sub(r"[^a-z0-9_]", "_", module.rsplit(".", 1)[-1].lower()).removeprefix("test_")
    return f"mmt_{stem[:30]}_{os.getpid()}"


@pytest.fixture(scope="module")
def cassandra_keyspace(request: pytest.FixtureRequest, cassandra_admin: Any) -> Iterator[str]:
    """A keyspace of this module (created by the first store that opens it), dropped when the module ends.

    Keyspaces this module left behind in a run that died (its pid is gone) are dropped first.
    """
    name = keyspace_name(request.module.__name__)
    prefix = name.rsplit("_", 1)[0] + "_"
    rows = admin_execute(cassandra_admin, "SELECT keyspace_name FROM system_schema.keyspaces")
    for (other,) in rows:
        pid = other.removeprefix(prefix)
        if other.startswith(prefix) and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            admin_execute(cassandra_admin, f"DROP KEYSPACE IF EXISTS {other}")
    admin_execute(cassandra_admin, f"DROP KEYSPACE IF EXISTS {name}")
    yield name
    admin_execute(cassandra_admin, f"DROP KEYSPACE IF EXISTS {name}")


def truncate_keyspace(admin: Any, keyspace: str, deadline_s: float = RESTART_WAIT_S) -> None:
    """Empty every archive table of ``keyspace`` that holds anything (the schema stays: TRUNCATE is far
    cheaper than DROP/CREATE, cheaper still skipped for empty tables, and the rest run concurrently)."""
    existing = {
        row[0]
        for row in admin_execute(
            admin, "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
        )
    }
    tables = [t for t in DATA_TABLES if t in existing]
    began = time.monotonic()
    while True:
        try:
            probes = [admin.execute_async(f"SELECT * FROM {keyspace}.{t} LIMIT 1") for t in tables]
            full = [t for t, probe in zip(tables, probes, strict=True) if probe.result().one() is not None]
            for future in [admin.execute_async(f"TRUNCATE {keyspace}.{t}") for t in full]:
                future.result()
            return
        except (NoHostAvailable, OperationTimedOut):
            if time.monotonic() - began > deadline_s:
                raise
            time.sleep(0.5)  # poll interval while the driver reconnects
