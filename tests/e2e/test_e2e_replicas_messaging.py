"""Two replicas each of the edge peer, health, send and subscription services (the messaging store shared,
SQLite on this host), over one archive, ingest and history, with a real RLPx peer connected to both edge
peers. A client sends through both send replicas (one balanced channel) and reads through both subscription
replicas. SIGKILL one replica of each mid-load — the send replica that owns the outbox shards, the
subscription writer, a health replica and an edge peer:

- every Send that was acknowledged (returned a request id) ends SUCCEEDED: the survivor takes the dead
  owner's shards over when their leases expire and publishes through the surviving edge peer;
- the surviving subscription replica takes the writer lease over and holds a sent record of each;
- the watches of the health service and the send feed move to the surviving replicas (round-robin skips the
  dead one); Sends that failed, failed UNAVAILABLE (they were in flight on the killed replica).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio
import pytest

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from mailmesh.subscription.v1 import subscription_pb2 as pb
from mailmesh.subscription.v1 import subscription_pb2_grpc
from meshharness import Allow, FreePorts, ServiceProcess, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from tests.e2e.e2e_replicas_support import balanced, client_channel
from tests.e2e.e2e_rlpx_support import (
    START_DEADLINE_S,
    STOP_GRACE_S,
    _enode,
    assert_clean_stop,
    killed_by_test,
)
from tests.integration.edge_peer.edge_peer_support import relay_client
from wakunode.memory import MemorySink

BRIDGED = "/waku/1/0x0e0f1013/rfc26"
SEND = "mailmesh.send.v1.SendService"
SUBSCRIPTION = "mailmesh.subscription.v1.SubscriptionService"
WAIT_S = 120.0  # one bound per wait; the awaited state ends each wait
ALLOW = (
    # The balanced client's Subscribe that lands on the replica which is not the records writer (by design:
    # "retry, another replica writes"; services/subscription/README.md "Replicas").
    Allow(
        r"Subscribe failed: this subscription replica is not the records writer",
        logger="meshcore.interceptors",
    ),
)


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[ProcessMesh]:
    (tmp_path / "cursor.secret").write_text("33" * 32 + "\n")
    (tmp_path / "cursor.secret").chmod(0o600)
    messaging = {  # one node-wide configuration (MESSAGING-API "Initial configuration")
        "MSGSTORE_BACKEND": "sqlite",
        "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "0.5",
        "MSGAPI_STORE_CONFIRMATION": "true",
        "MSGAPI_STORE_CHECK_INTERVAL_SECONDS": "0.3",
    }

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer", "health", "send", "subscription"],
            ports=FreePorts(),
            state_dir=tmp_path,
            replicas={"edge_peer": 2, "health": 2, "send": 2, "subscription": 2},
            env={
                "archive": {"ARCHIVE_BACKEND": "sqlite"},
                "ingest": {"INGEST_MIN_POW": "0"},
                "edge_peer": {"EDGE_MIN_POW": "0"},
                "health": {  # one Waku peer (on any edge peer) makes the node Healthy
                    "HEALTH_MINIMALLY_HEALTHY_PEERS": "1",
                    "HEALTH_HEALTHY_PEERS": "1",
                    "HEALTH_HOLD_SECONDS": "0",
                },
                "send": {**messaging, "SEND_LEASE_TTL_SECONDS": "2", "SEND_STORE_CHECK_DELAY_SECONDS": "0.2"},
                "subscription": {
                    **messaging,
                    "SUBSCRIPTION_WRITER_LEASE_SECONDS": "2",
                    "SUBSCRIPTION_TAIL_INTERVAL_SECONDS": "0.05",
                },
            },
        )

    mesh = await asyncio.to_thread(start_mesh, specs, timeout=START_DEADLINE_S, log_dir=tmp_path / "logs")
    try:
        yield mesh
    finally:
        killed = killed_by_test(mesh)
        codes = await mesh.stop_async(STOP_GRACE_S)
    assert_clean_stop(mesh, codes, ALLOW, killed=killed)


async def _subscribe(stub: subscription_pb2_grpc.SubscriptionServiceAsyncStub) -> str:
    """Subscribe through the balanced channel: the replica that is not the writer answers UNAVAILABLE."""
    async with asyncio.timeout(WAIT_S):
        while True:
            try:
                reply = await stub.Subscribe(pb.SubscribeRequest(content_topics=[BRIDGED]), timeout=10)
            except grpc.aio.AioRpcError as err:
                assert err.code() is grpc.StatusCode.UNAVAILABLE, err
                continue  # the next call goes to the other replica
            return reply.subscription_id


async def _sends(stub: send_pb2_grpc.SendServiceAsyncStub, acked: list[str], failed: list[str]) -> None:
    """Send until cancelled; the request ids returned are acknowledged, failures are recorded by code."""
    for number in range(1_000_000):
        message = common_pb2.WakuMessage(payload=b"m%d" % number, content_topic=BRIDGED)
        try:
            reply = await stub.Send(send_pb2.SendRequest(message=message), timeout=10)
        except grpc.aio.AioRpcError as err:
            failed.append(err.code().name)
            continue
        acked.append(reply.request_id)
        await asyncio.sleep(0.05)  # the load's pace, not a synchronisation


async def _until(what: str, predicate: Callable[[], Awaitable[bool]]) -> None:
    try:
        async with asyncio.timeout(WAIT_S):
            while not await predicate():
                await asyncio.sleep(0.1)  # polling state other processes change
    except TimeoutError:
        raise AssertionError(f"not within {WAIT_S} s: {what}") from None


def _one_with(replicas: list[ServiceProcess], metric: str) -> ServiceProcess:
    """The first replica whose ``metric`` is positive (send replicas share the shards fairly: either owns
    some, and the one killed takes its shards' in-flight requests with it)."""
    return next(r for r in replicas if r.metric(metric) > 0)


@pytest.mark.timeout(600)
async def test_one_replica_of_each_killed_mid_load_loses_no_acknowledged_send(
    processes: ProcessMesh,
) -> None:
    edges, healths = processes.of_kind("edge_peer"), processes.of_kind("health")
    sends, subscriptions = processes.of_kind("send"), processes.of_kind("subscription")
    sink = MemorySink()
    client = relay_client(sink)
    await client.start()
    send_channel = client_channel(balanced(sends), SEND)
    sub_channel = client_channel(balanced(subscriptions), SUBSCRIPTION, idempotent=("GetMessageRecord",))
    sender = send_pb2_grpc.SendServiceStub(send_channel)
    records = subscription_pb2_grpc.SubscriptionServiceStub(sub_channel)
    acked: list[str] = []
    failed: list[str] = []
    try:
        for edge in edges:
            await client.connect(_enode(edge))
        await _subscribe(records)
        await _until("the shards are owned", lambda: _owned(sends))
        sending = asyncio.create_task(_sends(sender, acked, failed))
        await _until("20 sends acknowledged", lambda: _at_least(acked, 20))
        victims = [
            _one_with(sends, "waku_send_shards_owned"),
            _one_with(subscriptions, "mailmesh_subscription_writer"),
            healths[1],
            edges[1],
        ]
        for victim in victims:
            victim.send_signal(signal.SIGKILL)
        for victim in victims:
            assert await victim.wait_exit_async(30) == -signal.SIGKILL
        killed_at = len(acked)
        await _until("20 more acknowledged", lambda: _at_least(acked, killed_at + 20))
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)

        [send_alive] = [s for s in sends if s.returncode is None]
        async with grpc.aio.insecure_channel(send_alive.address) as channel:
            survivor = send_pb2_grpc.SendServiceStub(channel)
            await _until("every acknowledged send succeeded", lambda: _all_succeeded(survivor, acked))
        await _until("a sent record of each", lambda: _all_recorded(records, acked))
        assert set(failed) <= {"UNAVAILABLE"}, failed
        [sub_alive] = [s for s in subscriptions if s.returncode is None]
        assert sub_alive.metric("mailmesh_subscription_writer") == 1  # it took the writer lease over
        hashes = {
            (
                await records.GetMessageRecord(pb.GetMessageRecordRequest(request_id=rid), timeout=10)
            ).record.envelope_hash
            for rid in acked
        }
        assert len(hashes) == len(acked) and hashes <= {
            e.hash for e in sink.envelopes
        }  # each reached the peer
    finally:
        await send_channel.close()
        await sub_channel.close()
        await client.stop()


async def _owned(sends: list[ServiceProcess]) -> bool:
    return sum(s.metric("waku_send_shards_owned") for s in sends) > 0


async def _at_least(items: list[str], count: int) -> bool:
    return len(items) >= count


async def _all_succeeded(stub: send_pb2_grpc.SendServiceAsyncStub, ids: list[str]) -> bool:
    for rid in ids:
        reply = await stub.GetSendStatus(send_pb2.GetSendStatusRequest(request_id=rid), timeout=10)
        if reply.status.progress.state != common_pb2.SEND_STATE_SUCCEEDED:
            return False
    return True


async def _all_recorded(stub: subscription_pb2_grpc.SubscriptionServiceAsyncStub, ids: list[str]) -> bool:
    for rid in ids:
        try:
            reply = await stub.GetMessageRecord(pb.GetMessageRecordRequest(request_id=rid), timeout=10)
        except grpc.aio.AioRpcError as err:
            assert err.code() is grpc.StatusCode.NOT_FOUND, err  # not merged yet
            return False
        if not reply.record.sent:
            return False
    return True
