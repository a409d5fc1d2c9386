"""Three send replicas as processes on one store (SQLite file, 6 outbox shards): each owns two shards; a
Cancel sent to a replica that does not own the request is forwarded over gRPC to the one that does (found
through the shard lease and its member row's address); one replica is SIGKILLed with requests pending in its
shards, the two survivors take its shards over (three each) and send everything once a Waku peer connects.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc.aio
import pytest

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from meshharness import CATALOG, FreePorts, ServiceProcess, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from msgstore.config import StoreConfig
from msgstore.factory import open_store
from msgstore.sharding import lease_name, shard_of
from services.send.ownership import GROUP
from tests.e2e.e2e_rlpx_support import START_DEADLINE_S, STOP_GRACE_S, _enode
from tests.integration.edge_peer.edge_peer_support import relay_client
from wakunode.memory import MemorySink

TOPIC = "/waku/1/0x0a0b0c0e/rfc26"
SHARDS = 6
WAIT_S = 60.0  # one bound for a whole wait; the condition ends each wait


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[ProcessMesh]:
    secret = tmp_path / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
    secret.write_text(os.urandom(32).hex() + "\n")
    secret.chmod(0o600)
    store = {
        "MSGSTORE_BACKEND": "sqlite",
        "MSGSTORE_SQLITE_PATH": str(tmp_path / "messaging.sqlite3"),  # one store for every replica
        "MSGSTORE_OUTBOX_SHARDS": str(SHARDS),
        "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "0.5",
    }

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer", "health", "send"],
            ports=FreePorts(),
            state_dir=tmp_path,
            replicas={"send": 3},
            env={
                "archive": {"ARCHIVE_BACKEND": "sqlite"},
                "health": {
                    "HEALTH_SEND_ADDR": "",
                    "HEALTH_SUBSCRIPTION_ADDR": "",
                    "HEALTH_MINIMALLY_HEALTHY_PEERS": "1",
                    "HEALTH_HEALTHY_PEERS": "1",
                    "HEALTH_HOLD_SECONDS": "0",
                },
                "send": {
                    **store,
                    "SEND_LEASE_TTL_SECONDS": "2",
                    "SEND_ADOPT_INTERVAL_SECONDS": "0.2",
                    "SEND_SUBSCRIPTION_ADDR": "",
                },
            },
        )

    mesh = await asyncio.to_thread(start_mesh, specs, timeout=START_DEADLINE_S, log_dir=tmp_path / "logs")
    try:
        yield mesh
    finally:
        codes = await mesh.stop_async(STOP_GRACE_S)
    assert {n: c for n, c in codes.items() if c not in (0, -signal.SIGKILL)} == {}
    noisy = mesh.unexpected(())
    assert not noisy, "\n".join(f"{name}: {line.text}" for name, lines in noisy.items() for line in lines)


async def shares(replicas: list[ServiceProcess], expected: list[int]) -> None:
    """Wait until each replica's ``waku_send_shards_owned`` is the expected count."""
    async with asyncio.timeout(WAIT_S):
        while [
            int(await asyncio.to_thread(r.metric, "waku_send_shards_owned")) for r in replicas
        ] != expected:
            await asyncio.sleep(0.1)  # the scrape interval, not a synchronisation


async def owner_address(tmp_path: Path, request_id: str) -> str:
    """The advertised address of the replica holding the request's shard (read from the shared store)."""
    cfg = StoreConfig.from_env(
        {
            "MSGSTORE_SQLITE_PATH": str(tmp_path / "messaging.sqlite3"),
            "MSGSTORE_OUTBOX_SHARDS": str(SHARDS),
        }
    )
    async with open_store(cfg) as store:
        lease = await store.leases.holder(lease_name(shard_of(request_id, SHARDS)))
        assert lease is not None
        # alive now: the owner's heartbeat is written before its lease is renewed, so its membership may end a
        # moment before the lease does (reading members at the lease's expiry missed the owner once)
        members = {m.name: m.address for m in await store.leases.members(GROUP, time.time())}
    return members[lease.owner]


async def states(address: str, ids: list[str]) -> set[int]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = send_pb2_grpc.SendServiceStub(channel)
        replies = [
            await stub.GetSendStatus(send_pb2.GetSendStatusRequest(request_id=i), timeout=10) for i in ids
        ]
    return {r.status.progress.state for r in replies}


async def until_all(address: str, ids: list[str], state: int) -> None:
    async with asyncio.timeout(WAIT_S):
        while await states(address, ids) != {state}:
            await asyncio.sleep(0.1)


async def test_three_replicas_share_forward_and_take_over(processes: ProcessMesh, tmp_path: Path) -> None:
    replicas = [processes.get(name) for name in ("send", "send-1", "send-2")]
    await shares(replicas, [2, 2, 2])
    ids: list[str] = []
    for i in range(12):  # no Waku peer yet: the node is Unhealthy and every request waits PAUSED
        async with grpc.aio.insecure_channel(replicas[i % 3].address) as channel:
            stub = send_pb2_grpc.SendServiceStub(channel)
            message = common_pb2.WakuMessage(payload=b"r%d" % i, content_topic=TOPIC)
            ids.append((await stub.Send(send_pb2.SendRequest(message=message), timeout=10)).request_id)
    await until_all(replicas[0].address, ids, common_pb2.SEND_STATE_PAUSED)

    doomed = ids.pop()  # canceled through a replica that does not own it
    owner = await owner_address(tmp_path, doomed)
    [other, *_] = [r for r in replicas if r.address != owner]
    async with grpc.aio.insecure_channel(other.address) as channel:
        reply = await send_pb2_grpc.SendServiceStub(channel).Cancel(
            send_pb2.CancelRequest(request_id=doomed), timeout=10
        )
    assert reply.canceled and reply.state == common_pb2.SEND_STATE_CANCELED
    assert await states(owner, [doomed]) == {common_pb2.SEND_STATE_CANCELED}

    victim = next(r for r in replicas if r.address == owner)  # dies with pending requests in its shards
    victim.send_signal(signal.SIGKILL)
    assert await victim.wait_exit_async(10) == -signal.SIGKILL
    survivors = [r for r in replicas if r is not victim]
    await shares(survivors, [3, 3])

    sink = MemorySink()
    client = relay_client(sink)
    await client.start()
    try:
        await client.connect(_enode(processes.get("edge_peer")))
        await until_all(survivors[0].address, ids, common_pb2.SEND_STATE_SUCCEEDED)
        received = await sink.wait_for(len(ids), timeout=WAIT_S)
        assert len({e.hash for e in received}) == len(ids)  # each sent, once
    finally:
        await client.stop()
