"""Fixtures of the cluster campaign (``make test-cluster``): the running 3-node cluster, one keyspace for the
whole session, and the figures file.

The cluster is started by make (``make cassandra-cluster-start``), as the single node is for ``make test``; a
test that finds a node down (a previous run stopped half-way) starts it again and waits until every node sees
every other Up/Normal, so each test begins on a whole cluster. Tests fail, never skip, when it cannot be had.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.results import Results
from tools.cassandra import cluster, ctl
from tools.cassandra.cluster import ClusterConfig


def whole(cc: ClusterConfig) -> ClusterConfig:
    """``cc`` once every node runs and every node sees all of them UN (restarting any that is down)."""
    for i, cfg in enumerate(cc.nodes()):
        if ctl.running_pid(cfg) is None:
            cluster.start_node(cc, i)
    for i in range(len(cc.hosts)):
        cluster.wait_ring(cc, i, dict.fromkeys(cc.hosts, "UN"), cc.start_timeout_s)
    return cc


@pytest.fixture(scope="session")
def cassandra_cluster() -> ClusterConfig:
    """The cluster of ``make cassandra-cluster-start`` (CASSANDRA_CLUSTER_* settings), whole."""
    cc = ClusterConfig.from_env()
    if not any(ctl.running_pid(cfg) for cfg in cc.nodes()):
        pytest.fail(
            "the Cassandra cluster is not running: make cassandra-cluster-start (or make test-cluster)"
        )
    return whole(cc)


@pytest.fixture(scope="session")
def campaign_keyspace(cassandra_cluster: ClusterConfig) -> Iterator[str]:
    """A keyspace of this session (the archive creates it with RF 3); dropped at the end."""
    name = f"mailmesh_cluster_{os.getpid()}"
    yield name
    from cassandra.cluster import Cluster

    whole(cassandra_cluster)
    driver = Cluster(list(cassandra_cluster.hosts), port=cassandra_cluster.native_port)
    try:
        driver.connect().execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
    finally:
        driver.shutdown()


@pytest.fixture(scope="session")
def results(cassandra_cluster: ClusterConfig) -> Iterator[Results]:
    """Figures of the session, written to ``CLUSTER_RESULTS`` (a path) at the end when it is set."""
    target = os.environ.get("CLUSTER_RESULTS", "").strip()
    out = Results("cluster", Path(target).resolve() if target else None)
    out.context["cluster"] = {
        "nodes": list(cassandra_cluster.hosts),
        "heap_per_node": cassandra_cluster.heap,
        "cassandra": ctl.cassandra_version(),
        "replication": "NetworkTopologyStrategy datacenter1: 3",
        "consistency": "LOCAL_QUORUM",
    }
    yield out
    out.write()
