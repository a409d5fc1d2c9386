"""The local Cassandra node (make cassandra-start) is real, is 5.0, stores data and keeps acknowledged writes.

These tests use the node that ``make cassandra-start`` started; they fail (never skip) when it does not
answer, with the reason. The last test kills the node with SIGKILL and starts it again through
tools/cassandra/ctl.py, so the node is running when the module ends (it had to be running to begin with).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tools.cassandra import ctl

pytestmark = pytest.mark.cassandra

KEYSPACE = "mailmesh_node_test"


@pytest.fixture(scope="module")
def cfg() -> ctl.NodeConfig:
    """The node's settings, from the same CASSANDRA_* variables make used."""
    return ctl.NodeConfig.from_env()


@pytest.fixture(scope="module")
def cql(cfg: ctl.NodeConfig) -> Iterator[Any]:
    """A driver session on the running node, with the test keyspace in place."""
    answering, line = ctl.status_line(cfg)
    if not answering:
        pytest.fail(f"local Cassandra not answering ({line}); run make cassandra-start\n{ctl.log_tail(cfg)}")
    with ctl.session(cfg) as s:
        s.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} "
            "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        yield s


def test_release_version_is_5_0(cfg: ctl.NodeConfig, cql: Any) -> None:
    row = cql.execute("SELECT release_version, cluster_name, data_center FROM system.local").one()
    assert row.release_version.startswith("5.0"), row.release_version
    assert row.cluster_name == "mailmesh-local"
    assert row.data_center == "datacenter1"
    assert ctl.cassandra_version() == row.release_version


def test_node_runs_with_the_rendered_durability_settings(cfg: ctl.NodeConfig, cql: Any) -> None:
    """Acknowledged means fsync'ed (batch), and the commit log is written the way ctl.py chose."""
    rows = cql.execute(
        "SELECT name, value FROM system_views.settings "
        "WHERE name IN ('commitlog_sync', 'commitlog_disk_access_mode')"
    )
    settings = {r.name: r.value for r in rows}
    assert settings == {
        "commitlog_sync": "batch",
        "commitlog_disk_access_mode": ctl.commitlog_access_mode(cfg),
    }


def test_write_then_read_back(cql: Any) -> None:
    cql.execute(
        f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.envelopes "
        "(topic blob, hash blob, payload blob, PRIMARY KEY (topic, hash))"
    )
    topic, payload = os.urandom(4), os.urandom(512)
    hashes = sorted(os.urandom(32) for _ in range(20))
    insert = cql.prepare(f"INSERT INTO {KEYSPACE}.envelopes (topic, hash, payload) VALUES (?, ?, ?)")
    for h in hashes:
        cql.execute(insert, (topic, h, payload))

    rows = list(cql.execute(f"SELECT hash, payload FROM {KEYSPACE}.envelopes WHERE topic = %s", (topic,)))

    assert [r.hash for r in rows] == hashes  # clustering order is byte order
    assert {r.payload for r in rows} == {payload}


def _data_files(cfg: ctl.NodeConfig, table: str) -> list[str]:
    return sorted(p.name for p in cfg.data_dir.glob(f"{KEYSPACE}/{table}-*/*-Data.db"))


@pytest.mark.timeout(420)
def test_acknowledged_write_survives_kill_9(cfg: ctl.NodeConfig, cql: Any) -> None:
    """commitlog_sync: batch acknowledges a write only once it is in the commit log, which is replayed."""
    # SIGKILL alone cannot tell batch from periodic (a write in an mmap'ed segment sits in the page cache
    # either way), so also check the setting that makes the write durable against a machine crash.
    sync = cql.execute("SELECT value FROM system_views.settings WHERE name = 'commitlog_sync'").one()
    assert sync.value == "batch"
    table = f"crash_{uuid.uuid4().hex[:12]}"
    cql.execute(f"CREATE TABLE {KEYSPACE}.{table} (k text PRIMARY KEY, v text)")
    key, value = uuid.uuid4().hex, "acknowledged before SIGKILL"
    cql.execute(f"INSERT INTO {KEYSPACE}.{table} (k, v) VALUES (%s, %s)", (key, value))
    # The row exists only in the memtable and the commit log: nothing was flushed to an SSTable.
    assert _data_files(cfg, table) == []

    pid = ctl.running_pid(cfg)
    assert pid is not None, f"no pid in {cfg.pid_file}; was the node started by make cassandra-start?"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while ctl.process_alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive 30 s after SIGKILL"
        time.sleep(0.1)

    result = ctl.start(cfg)  # replays the commit log; raises StartFailed with the log tail on failure

    assert not result.already_running
    with ctl.session(cfg) as fresh:
        row = fresh.execute(f"SELECT v FROM {KEYSPACE}.{table} WHERE k = %s", (key,)).one()
        assert row is not None, f"acknowledged row lost after kill -9\n{ctl.log_tail(cfg)}"
        assert row.v == value
        fresh.execute(f"DROP TABLE {KEYSPACE}.{table}")
