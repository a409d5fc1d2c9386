"""SIGKILL the send service with requests pending: a new process on the same store (the harness's state
directory, SQLite) takes the dead one's shards over once their leases expire, every pending request is still
there, and they are sent when the node becomes healthy (a real RLPx peer connects)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import grpc
import grpc.aio

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from meshharness import CATALOG, FreePorts, ServiceProcess, plan, spawn, start_mesh
from tests.e2e.e2e_rlpx_support import START_DEADLINE_S, STOP_GRACE_S
from tests.integration.edge_peer.edge_peer_support import relay_client
from wakunode.memory import MemorySink

TOPIC = "/waku/1/0x0a0b0c0d/rfc26"


def _enode(edge: ServiceProcess) -> str:
    line = edge.logs.wait_for(lambda line: bool(line.record and line.record.get("enode")), START_DEADLINE_S)
    assert line.record is not None
    return str(line.record["enode"])


async def _states(address: str, ids: list[str]) -> list[int]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = send_pb2_grpc.SendServiceStub(channel)
        replies = [
            await stub.GetSendStatus(send_pb2.GetSendStatusRequest(request_id=i), timeout=10) for i in ids
        ]
    return [r.status.progress.state for r in replies]


async def _until_all(address: str, ids: list[str], state: int) -> None:
    async with asyncio.timeout(60):
        while set(await _states(address, ids)) != {state}:
            await asyncio.sleep(0.1)


async def test_sigkill_loses_no_pending_request_and_a_new_process_sends_them(tmp_path: Path) -> None:
    secret = tmp_path / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
    secret.write_text(os.urandom(32).hex() + "\n")
    secret.chmod(0o600)
    healthy_at_one_peer = {
        "HEALTH_MINIMALLY_HEALTHY_PEERS": "1",
        "HEALTH_HEALTHY_PEERS": "1",
        "HEALTH_HOLD_SECONDS": "0",
    }
    mesh = start_mesh(
        lambda: plan(
            ["archive", "ingest", "history", "edge_peer", "health", "send"],
            ports=FreePorts(),
            state_dir=tmp_path,
            env={
                "archive": {"ARCHIVE_BACKEND": "sqlite"},
                "health": {"HEALTH_SEND_ADDR": "", "HEALTH_SUBSCRIPTION_ADDR": "", **healthy_at_one_peer},
                "send": {
                    "MSGSTORE_BACKEND": "sqlite",
                    "SEND_LEASE_TTL_SECONDS": "2",
                    "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "0.5",
                },
            },
        ),
        timeout=START_DEADLINE_S,
        log_dir=tmp_path / "logs",
    )
    sink = MemorySink()
    client = relay_client(sink)
    replacement: ServiceProcess | None = None
    try:
        dead = mesh.get("send")
        async with grpc.aio.insecure_channel(dead.address) as channel:
            stub = send_pb2_grpc.SendServiceStub(channel)
            ids = []
            for i in range(3):
                message = common_pb2.WakuMessage(payload=b"k%d" % i, content_topic=TOPIC)
                ids.append((await stub.Send(send_pb2.SendRequest(message=message), timeout=10)).request_id)
        await _until_all(dead.address, ids, common_pb2.SEND_STATE_PAUSED)  # Unhealthy: no Waku peer yet
        dead.send_signal(signal.SIGKILL)
        assert await dead.wait_exit_async(10) == -signal.SIGKILL
        replacement = spawn(dead.spec, log_file=tmp_path / "logs" / "send-2.log")
        await replacement.wait_serving_async(START_DEADLINE_S)
        async with grpc.aio.insecure_channel(replacement.address) as channel:
            stub = send_pb2_grpc.SendServiceStub(channel)
            pending = await stub.ListPendingRequests(send_pb2.ListPendingRequestsRequest(), timeout=10)
        assert sorted(pending.request_ids) == sorted(ids)  # nothing lost with the process
        await client.start()
        await client.connect(_enode(mesh.get("edge_peer")))
        await _until_all(replacement.address, ids, common_pb2.SEND_STATE_SUCCEEDED)
        assert len(await sink.wait_for(3, timeout=30)) == 3
        assert await replacement.stop_async(STOP_GRACE_S) == 0
        noisy = replacement.logs.unexpected(())
        assert not noisy, "\n".join(line.text for line in noisy)
    finally:
        await client.stop()
        if replacement is not None and replacement.returncode is None:
            await replacement.stop_async(STOP_GRACE_S)
        codes = mesh.stop(STOP_GRACE_S)
    assert {n: c for n, c in codes.items() if n != "send" and c != 0} == {}
