"""The mesh under test — archive, ingest, history-query, one edge peer; processes — on the 3-node cluster.

The archive runs with the production Cassandra settings the campaign is about: every node a contact point,
a keyspace of its own created with NetworkTopologyStrategy ``datacenter1: 3`` (SimpleSnitch's data centre),
reads and writes at LOCAL_QUORUM. Every other setting is the service's default, except the edge peer's
ingest buffer: small enough that an outage of the archive reaches the Waku peers as TCP back-pressure within
seconds, and a wait long enough that the edge peer never drops what it holds back (docs/edge-peer.md
"Relay → ingest"), so every envelope a peer posted must end up archived.

Also here: whether envelopes are archived (the archive service's ``ContainsEnvelopes``, LOCAL_QUORUM), what
one node holds on its own (a scan at consistency ONE that only that node can serve), and the ring as each
node sees it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc

from archivestore.cassandra.schema import KEYS_TABLE, TIME_TABLE, TOPIC_TABLE
from archivestore.cassandra.writes import KIND_ENVELOPE
from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from meshharness import CATALOG, Mesh, ServiceSpec, plan, start_mesh
from meshharness.mesh import FreePorts
from tools.cassandra import ctl
from tools.cassandra.cluster import ClusterConfig

__all__ = [
    "EDGE_BUFFER",
    "archive_env",
    "enode_of",
    "missing",
    "node_hashes",
    "only",
    "pending_hints",
    "start_cluster_mesh",
]

#: Envelopes the edge peer holds for ingest before it pushes back on the peers (default 50,000).
EDGE_BUFFER = 1500
START_S = 120.0
#: Attempts of one verification read (UNAVAILABLE is retryable).
READ_ATTEMPTS = 5


def archive_env(cc: ClusterConfig, keyspace: str) -> dict[str, str]:
    """The archive's (and the Spark job's) settings for ``keyspace`` on the cluster."""
    return {
        "ARCHIVE_BACKEND": "cassandra",
        "ARCHIVE_CASSANDRA_HOSTS": cc.contact_points,
        "ARCHIVE_CASSANDRA_PORT": str(cc.native_port),
        "ARCHIVE_CASSANDRA_KEYSPACE": keyspace,
        "ARCHIVE_CASSANDRA_REPLICATION_DCS": "datacenter1=3",
        "ARCHIVE_CASSANDRA_CONSISTENCY": "LOCAL_QUORUM",
        "ARCHIVE_CASSANDRA_LOCAL_DC": "datacenter1",
    }


def start_cluster_mesh(cc: ClusterConfig, keyspace: str, state: Path) -> Mesh:
    """Start the four services on free ports against ``keyspace`` (created by the archive)."""
    state.mkdir(parents=True, exist_ok=True)
    secret = state / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
    secret.write_text(os.urandom(32).hex() + "\n")
    secret.chmod(0o600)
    env = {
        "archive": archive_env(cc, keyspace),
        "edge_peer": {
            "EDGE_INGEST_BUFFER_ENVELOPES": str(EDGE_BUFFER),
            "EDGE_INGEST_BUFFER_WAIT_SECONDS": "60",
        },
    }

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer"], ports=FreePorts(), state_dir=state, env=env
        )

    return start_mesh(specs, timeout=START_S, log_dir=state / "logs")


def enode_of(mesh: Mesh) -> str:
    """The edge peer's enode URL, from its start-up log line."""
    edge = mesh.get("edge_peer")
    line = edge.logs.wait_for(lambda line: bool(line.record and line.record.get("enode")), START_S)
    assert line.record is not None
    return str(line.record["enode"])


def missing(archive_addr: str, hashes: Sequence[bytes]) -> list[bytes]:
    """Those of ``hashes`` the archive service does not report as archived (reads at LOCAL_QUORUM).

    UNAVAILABLE is retried a few times, as its contract asks of any client: just after nodes return, a
    replica still replaying hints can let a quorum read time out (seen once: ReadTimeout, 1 of 2 responses).
    """
    out: list[bytes] = []
    with grpc.insecure_channel(archive_addr) as channel:
        stub = archive_pb2_grpc.ArchiveServiceStub(channel)
        for i in range(0, len(hashes), 1000):
            chunk = list(hashes[i : i + 1000])
            request = archive_pb2.ContainsEnvelopesRequest(envelope_hashes=chunk)
            for attempt in range(1, READ_ATTEMPTS + 1):
                try:
                    present = set(stub.ContainsEnvelopes(request, timeout=60).present_envelope_hashes)
                    break
                except grpc.RpcError as err:
                    if err.code() is not grpc.StatusCode.UNAVAILABLE or attempt == READ_ATTEMPTS:
                        raise
                    time.sleep(2.0 * attempt)  # back-off before retrying an UNAVAILABLE read
            out += [h for h in chunk if h not in present]
    return out


@contextlib.contextmanager
def only(cc: ClusterConfig, index: int) -> Iterator[Any]:
    """A driver session that sends every request to node ``index`` as coordinator, at consistency ONE."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    host = cc.hosts[index]
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([host]),
        consistency_level=ConsistencyLevel.ONE,
        request_timeout=60,
    )
    cluster = Cluster([host], port=cc.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def node_hashes(cc: ClusterConfig, index: int, keyspace: str) -> dict[str, set[bytes]]:
    """Envelope hashes in each archive table as node ``index`` alone holds them.

    The scan runs at consistency ONE with that node as coordinator: with the other replicas down, only its
    own data can answer (a replica's content, not the cluster's).
    """
    with only(cc, index) as s:
        out = {
            table: {bytes(r[0]) for r in s.execute(f"SELECT hash FROM {keyspace}.{table}")}
            for table in (TIME_TABLE, TOPIC_TABLE)
        }
        keys = s.execute(f"SELECT key, kind FROM {keyspace}.{KEYS_TABLE}")
        out[KEYS_TABLE] = {bytes(r[0]) for r in keys if r[1] == KIND_ENVELOPE}
        return out


def pending_hints(cc: ClusterConfig, indexes: Sequence[int]) -> dict[str, list[list[Any]]]:
    """Each node's hints not yet delivered (``system_views.pending_hints``: target address, files)."""
    out = {}
    for i in indexes:
        with only(cc, i) as s:
            out[cc.hosts[i]] = [
                [str(r[0]), int(r[1])]
                for r in s.execute("SELECT address, files FROM system_views.pending_hints")
            ]
    return out


def node_state(cc: ClusterConfig) -> dict[str, bool]:
    """Which nodes' processes run, by address."""
    return {cfg.host: ctl.running_pid(cfg) is not None for cfg in cc.nodes()}
