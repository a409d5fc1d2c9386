"""``python -m services.edge_peer`` as a process (the harness): node key created 0600 and kept, enode logged,
health SERVING, SIGTERM exits 0, bad config exits 2."""

from __future__ import annotations

import stat
from pathlib import Path

from devp2p.enode import parse_enode
from meshharness import FreePorts, ServiceProcess, ServiceSpec, plan, spawn, start_mesh
from wakucodec import secp

TIMEOUT = 60.0  # a cold interpreter imports grpc and OpenTelemetry first


def _specs(tmp: Path, **extra: str) -> list[ServiceSpec]:
    env = {
        "EDGE_NODE_KEY_FILE": str(tmp / "keys" / "nodekey"),
        # Nothing listens there: channels connect lazily, the ingest stream keeps retrying.
        "EDGE_INGEST_ADDR": "127.0.0.1:9",
        "EDGE_HISTORY_ADDR": "127.0.0.1:9",
        "MAILMESH_LOG_FORMAT": "json",
        **extra,
    }
    return plan(["edge_peer"], ports=FreePorts(metrics=False), env={"edge_peer": env})


def _run_once(tmp: Path) -> tuple[str, ServiceProcess]:
    """Start (until grpc.health.v1 reports EdgePeerService SERVING), read the enode, SIGTERM."""
    edge = start_mesh(lambda: _specs(tmp), timeout=TIMEOUT).get("edge_peer")
    try:
        line = edge.logs.wait_for(lambda line: bool(line.record and line.record.get("enode")), TIMEOUT)
        assert line.record is not None
    finally:
        code = edge.stop(TIMEOUT)
    assert code == 0 and not edge.killed, edge.logs.tail()
    return str(line.record["enode"]), edge


def test_node_key_persists_and_sigterm_exits_zero(tmp_path: Path) -> None:
    first, edge = _run_once(tmp_path)
    key_file = tmp_path / "keys" / "nodekey"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = bytes.fromhex(key_file.read_text())
    assert parse_enode(first).pubkey == secp.public_key(key)
    messages = edge.logs.messages()
    assert "SIGTERM received" in messages and "stopped" in messages
    assert all(record["service"] == "edge-peer" for record in edge.logs.records())
    second, _ = _run_once(tmp_path)
    assert parse_enode(second).pubkey == parse_enode(first).pubkey


def test_bad_config_exits_two(tmp_path: Path) -> None:
    [spec] = _specs(tmp_path, EDGE_STATIC_PEERS="enode://nope", EDGE_MAX_PEERS="-1")
    edge = spawn(spec)
    assert edge.wait_exit(TIMEOUT) == 2
    assert "EDGE_STATIC_PEERS" in edge.logs.text() and "EDGE_MAX_PEERS" in edge.logs.text()
