"""tools/cassandra/cluster.py without a cluster: settings, every node's cassandra.yaml and JVM command,
``nodetool status`` parsing (the smoke ``make test`` runs; the campaign itself is ``make test-cluster``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tools.cassandra import cluster, ctl
from tools.cassandra.cluster import ClusterConfig

STATUS = """\
Datacenter: datacenter1
=======================
Status=Up/Down
|/ State=Normal/Leaving/Joining/Moving
--  Address    Load        Tokens  Owns (effective)  Host ID                               Rack
UN  127.0.0.2  1.26 MiB    1       100.0%            0f9e9a0e-6f4d-4a1e-9b55-1c1f4c2f6a01  rack1
DN  127.0.0.3  1.18 MiB    1       100.0%            5c5b5e0c-2f0b-4b9e-8a36-7d2c8c0b7f02  rack1
UJ  127.0.0.4  95.3 KiB    1       ?                 9a1b6c3d-0e4f-4a5b-8c7d-6e5f4a3b2c03  rack1
"""


def test_defaults_are_three_loopback_aliases_beside_the_single_node() -> None:
    cc = ClusterConfig.from_env({})
    assert cc.hosts == ("127.0.0.2", "127.0.0.3", "127.0.0.4")
    assert cc.contact_points == "127.0.0.2,127.0.0.3,127.0.0.4"
    nodes = cc.nodes()
    assert [n.host for n in nodes] == list(cc.hosts)
    assert {n.native_port for n in nodes} == {9042}  # one CQL port: the driver reaches every node on it
    assert [n.jmx_port for n in nodes] == [
        7201,
        7202,
        7203,
    ]  # JMX binds 127.0.0.1 whatever the node's address
    assert len({n.state_dir for n in nodes}) == 3
    assert all(n.state_dir.parent == ctl.ROOT / "var" / "cassandra-cluster" for n in nodes)
    assert ctl.NodeConfig().state_dir not in {n.state_dir for n in nodes}


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"CASSANDRA_CLUSTER_HOSTS": "127.0.0.1,127.0.0.2"}, "127.0.0.1 is not a loopback alias"),
        ({"CASSANDRA_CLUSTER_HOSTS": "10.0.0.2,10.0.0.3"}, "10.0.0.2 is not a loopback alias"),
        ({"CASSANDRA_CLUSTER_HOSTS": "127.0.0.2"}, "two or more distinct addresses"),
        ({"CASSANDRA_CLUSTER_HOSTS": "127.0.0.2,127.0.0.2"}, "two or more distinct addresses"),
        ({"CASSANDRA_CLUSTER_HEAP": "lots"}, "CASSANDRA_CLUSTER_HEAP='LOTS'"),
        ({"CASSANDRA_CLUSTER_JMX_PORT": "7198"}, "clash with CQL, storage or the single node's 7199"),
        ({"CASSANDRA_CLUSTER_START_TIMEOUT": "soon"}, "CASSANDRA_CLUSTER_START_TIMEOUT='soon'"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ctl.ConfigError, match=problem):
        ClusterConfig.from_env(env)


def test_each_node_renders_one_ring_with_its_own_address_token_and_state() -> None:
    cc = ClusterConfig.from_env({"CASSANDRA_CLUSTER_STATE_DIR": "var/elsewhere"})
    docs = [yaml.safe_load(cluster.render_node_yaml(cc, i, fs_type="ext4")) for i in range(3)]
    for i, doc in enumerate(docs):
        assert doc["cluster_name"] == cluster.CLUSTER_NAME != "mailmesh-local"  # never joins the single node
        assert doc["listen_address"] == doc["rpc_address"] == cc.hosts[i]
        assert doc["seed_provider"][0]["parameters"][0]["seeds"] == "127.0.0.2:7000"
        assert doc["auto_bootstrap"] is True and doc["hinted_handoff_enabled"] is True
        assert doc["max_hint_window"] == "3h"
        assert doc["commitlog_sync"] == "batch"  # the single node's durability, unchanged
        assert (
            Path(doc["data_file_directories"][0]) == ctl.ROOT / "var" / "elsewhere" / f"node{i + 1}" / "data"
        )
    tokens = [int(doc["initial_token"]) for doc in docs]
    assert tokens == sorted(tokens) and tokens[0] == -(2**63)
    assert tokens[1] - tokens[0] == tokens[2] - tokens[1] == 2**64 // 3  # evenly spaced


def test_the_single_node_yaml_is_rendered_as_before() -> None:
    # The cluster reuses ctl.render_yaml; the shared node's own rendering must not change (a running node
    # compares it to its file before `start` accepts it).
    text = ctl.render_yaml(ctl.NodeConfig(), fs_type="ext4")
    assert "\nhinted_handoff_enabled: false\n" in text and "\ninitial_token: 0\n" in text


def test_cluster_jvm_options_override_the_single_node_speed_ups(tmp_path: Path) -> None:
    (tmp_path / "jamm-0.4.0.jar").touch()
    cfg = ClusterConfig.from_env({}).node(1)
    cmd = ctl.jvm_command(cfg, "java", lib_dir=tmp_path)
    for name, value in (("skip_wait_for_gossip_to_settle", "-1"), ("shutdown_announce_in_ms", "2000")):
        flags = [f for f in cmd if f.startswith(f"-Dcassandra.{name}=")]
        assert flags[-1] == f"-Dcassandra.{name}={value}"  # Java keeps the last -D of a name
    assert "-Dcassandra.jmx.local.port=7202" in cmd and "-Xmx640M" in cmd


def test_nodetool_status_is_parsed_by_address() -> None:
    assert cluster.parse_status(STATUS) == {"127.0.0.2": "UN", "127.0.0.3": "DN", "127.0.0.4": "UJ"}
    assert cluster.parse_status("nodetool: Failed to connect to '127.0.0.1:7201'") == {}
