"""``python -m services.edge_peer`` as a process: node key created 0600 and kept, enode logged, health
SERVING, SIGTERM exits 0, bad config exits 2."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devp2p.enode import parse_enode
from wakucodec import secp

REPO = Path(__file__).resolve().parents[3]
TIMEOUT = 30


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EDGE_", "OTEL_", "MAILMESH_"))}
    env.update(
        {
            "EDGE_GRPC_HOST": "127.0.0.1",
            "EDGE_GRPC_PORT": "0",
            "EDGE_METRICS_PORT": "-1",
            "EDGE_LISTEN_HOST": "127.0.0.1",
            "EDGE_LISTEN_PORT": "0",
            "EDGE_NODE_KEY_FILE": str(tmp / "keys" / "nodekey"),
            # Nothing listens there: channels connect lazily, the ingest stream keeps retrying.
            "EDGE_INGEST_ADDR": "127.0.0.1:9",
            "EDGE_HISTORY_ADDR": "127.0.0.1:9",
            "MAILMESH_LOG_FORMAT": "json",
        }
    )
    env.update(extra)
    return env


async def _spawn(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.edge_peer",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _until_serving(proc: asyncio.subprocess.Process, logs: list[dict[str, Any]]) -> tuple[str, int]:
    """Read JSON log lines until the enode and the gRPC port are known."""
    assert proc.stdout is not None and proc.stderr is not None
    enode, port = "", 0
    while not (enode and port):
        line = (await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)).decode()
        if not line:
            raise AssertionError("exited early: " + (await proc.stderr.read()).decode())
        if line.startswith("{"):
            entry = json.loads(line)
            logs.append(entry)
            enode = enode or entry.get("enode", "")
            if entry["msg"].startswith("serving "):
                port = int(entry["grpc_port"])
    return enode, port


async def _run_once(tmp: Path) -> tuple[str, list[dict[str, Any]]]:
    proc = await _spawn(_env(tmp))
    logs: list[dict[str, Any]] = []
    try:
        enode, port = await _until_serving(proc, logs)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="mailmesh.edgepeer.v1.EdgePeerService"), timeout=10
            )
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    logs += [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    return enode, logs


async def test_node_key_persists_and_sigterm_exits_zero(tmp_path: Path) -> None:
    first, logs = await _run_once(tmp_path)
    key_file = tmp_path / "keys" / "nodekey"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = bytes.fromhex(key_file.read_text())
    assert parse_enode(first).pubkey == secp.public_key(key)
    messages = [entry["msg"] for entry in logs]
    assert "SIGTERM received" in messages and "stopped" in messages
    assert all(entry["service"] == "edge-peer" for entry in logs)
    second, _ = await _run_once(tmp_path)
    assert parse_enode(second).pubkey == parse_enode(first).pubkey


async def test_bad_config_exits_two(tmp_path: Path) -> None:
    proc = await _spawn(_env(tmp_path, EDGE_STATIC_PEERS="enode://nope", EDGE_MAX_PEERS="-1"))
    _, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode == 2
    assert "EDGE_STATIC_PEERS" in err.decode() and "EDGE_MAX_PEERS" in err.decode()
