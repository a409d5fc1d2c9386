"""The subscription service as two processes on one SQLite store, in the whole mesh (archive, ingest, history,
edge peer, health), with a real wakunode RLPx peer posting envelopes, and SIGKILL mid-flight.

One replica writes (the ``records/writer`` lease), the other serves the same records and events from the
shared store. SIGKILL the writer while envelopes arrive: the other replica takes over within the lease TTL
and its edge stream resumes exactly after the last envelope the dead writer committed (the position is
committed with the records), and every envelope becomes a `received` (then `stored`) record. SIGKILL that
one too, post while no replica runs, restart it: it resumes exactly again, the envelopes posted meanwhile
are recovered, and a consumer that resumes after its last sequence misses nothing and sees nothing twice.
With a relay cache too small to hold what arrived meanwhile, the restarted writer says so (a WARNING and
``mailmesh_subscription_feed_resume_misses_total``) instead of losing envelopes silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest

from mailmesh.subscription.v1 import subscription_pb2 as pb
from mailmesh.subscription.v1 import subscription_pb2_grpc
from meshharness import ENV_PREFIXES, Allow, FreePorts, ServiceProcess, ServiceSpec, plan, spawn, start_mesh
from meshharness import Mesh as ProcessMesh
from tests.e2e.e2e_rlpx_support import (
    START_DEADLINE_S,
    STOP_GRACE_S,
    _enode,
    assert_clean_stop,
    killed_by_test,
)
from tests.integration.edge_peer.edge_peer_support import envelopes, relay_client

TOPIC = b"\x0e\x0f\x10\x11"
BRIDGED = "/waku/1/0x0e0f1011/rfc26"
LEASE_S = "2"
ALLOW: tuple[Allow, ...] = ()


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[ProcessMesh]:
    async with running_mesh(tmp_path, replicas=2) as mesh:
        yield mesh


#: The edge peer keeps this many envelopes for resumption in the small-cache mesh.
SMALL_CACHE = 5
MISSED = Allow(r"cannot resume after sequence \d+ of epoch", logger="services.subscription.followers")


@pytest.fixture
async def small_cache(tmp_path: Path) -> AsyncIterator[ProcessMesh]:
    async with running_mesh(
        tmp_path, replicas=1, edge={"EDGE_STREAM_REPLAY_ENVELOPES": str(SMALL_CACHE)}, allow=(MISSED,)
    ) as mesh:
        yield mesh


@contextlib.asynccontextmanager
async def running_mesh(
    tmp_path: Path, *, replicas: int, edge: dict[str, str] | None = None, allow: tuple[Allow, ...] = ALLOW
) -> AsyncIterator[ProcessMesh]:
    """The whole mesh with ``replicas`` subscription processes on one store; quiet logs but ``allow``."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "cursor.secret").write_text("11" * 32 + "\n")
    (state / "cursor.secret").chmod(0o600)
    shared = {
        "MSGSTORE_SQLITE_PATH": str(state / "messaging.sqlite3"),  # both replicas: one store
        "SUBSCRIPTION_WRITER_LEASE_SECONDS": LEASE_S,
        "SUBSCRIPTION_TAIL_INTERVAL_SECONDS": "0.05",
        "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "0.3",
        "MSGAPI_STORE_CONFIRMATION": "true",
        "MSGAPI_STORE_CHECK_INTERVAL_SECONDS": "0.3",
    }

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer", "health", "subscription"],
            ports=FreePorts(),
            state_dir=state,
            replicas={"subscription": replicas},
            env={
                "archive": {"ARCHIVE_BACKEND": "sqlite"},
                "ingest": {"INGEST_MIN_POW": "0"},
                "edge_peer": {"EDGE_MIN_POW": "0", **(edge or {})},
                "health": {
                    "HEALTH_MINIMALLY_HEALTHY_PEERS": "1",
                    "HEALTH_HEALTHY_PEERS": "1",
                    "HEALTH_SEND_ADDR": "",
                    "HEALTH_SUBSCRIPTION_ADDR": "",
                },
                "subscription": shared,
            },
        )

    mesh = await asyncio.to_thread(start_mesh, specs, timeout=START_DEADLINE_S, log_dir=state / "logs")
    try:
        yield mesh
    finally:
        killed = killed_by_test(mesh)
        codes = await mesh.stop_async(STOP_GRACE_S)
    assert_clean_stop(mesh, codes, allow, killed=killed)


def stub(service: ServiceProcess) -> subscription_pb2_grpc.SubscriptionServiceAsyncStub:
    return subscription_pb2_grpc.SubscriptionServiceStub(grpc.aio.insecure_channel(service.address))


async def subscribe_on_writer(replicas: list[ServiceProcess]) -> tuple[ServiceProcess, str]:
    """Subscribe through whichever replica writes (the other answers UNAVAILABLE)."""
    for _ in range(200):
        for replica in replicas:
            try:
                reply = await stub(replica).Subscribe(
                    pb.SubscribeRequest(content_topics=[BRIDGED]), timeout=5
                )
            except grpc.aio.AioRpcError as err:
                assert err.code() is grpc.StatusCode.UNAVAILABLE
                continue
            return replica, reply.subscription_id
        await asyncio.sleep(0.05)
    raise AssertionError("no replica took the writer lease")


async def received_hashes(call: object, want: int, seen: dict[bytes, int]) -> int:
    """Read message:received events until ``want`` distinct envelopes; returns the last sequence read."""
    last = 0
    while len(seen) < want:
        reply = await asyncio.wait_for(call.read(), 30)  # type: ignore[attr-defined]
        assert reply is not grpc.aio.EOF
        last = reply.event.sequence
        envelope_hash = reply.event.record.envelope_hash
        seen[envelope_hash] = seen.get(envelope_hash, 0) + 1
    return last


def restart(mesh: ProcessMesh, dead: ServiceProcess) -> ServiceProcess:
    fresh = spawn(dead.spec, strip_env_prefixes=ENV_PREFIXES)
    mesh.services[mesh.services.index(dead)] = fresh
    fresh.wait_serving(START_DEADLINE_S)
    return fresh


async def test_sigkill_one_replica_then_both_loses_no_record_and_no_event(processes: ProcessMesh) -> None:
    replicas = processes.of_kind("subscription")
    writer, sid = await subscribe_on_writer(replicas)
    other = next(r for r in replicas if r is not writer)
    edge = processes.of_kind("edge_peer")[0]
    client = relay_client()
    await client.start()
    try:
        info = await client.connect(_enode(edge))
        batch = envelopes(30, topic=TOPIC)
        call = stub(other).StreamEvents(
            pb.StreamEventsRequest(
                filter=pb.EventFilter(types=[pb.EVENT_TYPE_MESSAGE_RECEIVED]), after_sequence=0
            )
        )
        seen: dict[bytes, int] = {}
        await client.post(info.pubkey, batch[:10])
        await received_hashes(call, 5, seen)  # some of the first ten are recorded ...
        exact = edge.metric("edge_stream_resumed_total")
        writer.stop(0, sig=signal.SIGKILL)  # ... and the writer dies mid-flight
        await client.post(info.pubkey, batch[10:20])
        last = await received_hashes(call, 20, seen)  # the other replica took over and caught up
        assert set(seen) == {e.hash for e in batch[:20]} and set(seen.values()) == {1}
        # it continued exactly after the dead writer's last committed envelope (no relay-cache replay)
        assert edge.metric("edge_stream_resumed_total") > exact
        assert other.metric("mailmesh_subscription_feed_resume_misses_total", feed="edge") == 0

        other.stop(0, sig=signal.SIGKILL)  # now both are dead
        await client.post(info.pubkey, batch[20:])  # accepted by the edge peer while nobody follows it
        exact = edge.metric("edge_stream_resumed_total")
        back = await asyncio.to_thread(restart, processes, other)
        resumed = stub(back).StreamEvents(
            pb.StreamEventsRequest(
                filter=pb.EventFilter(types=[pb.EVENT_TYPE_MESSAGE_RECEIVED]), after_sequence=last
            )
        )
        await received_hashes(resumed, 30, seen)
        assert set(seen) == {e.hash for e in batch} and set(seen.values()) == {
            1
        }  # nothing missing, nothing twice
        assert edge.metric("edge_stream_resumed_total") > exact  # after the committed position, exactly
        resumed.cancel()

        async def all_stored() -> bool:
            request = pb.ListMessageRecordsRequest(filter=pb.RecordFilter(subscription_id=sid))
            records = [
                r async for chunk in stub(back).ListMessageRecords(request, timeout=10) for r in chunk.records
            ]
            return len(records) == 30 and all(r.received and r.stored for r in records)

        for _ in range(400):
            if await all_stored():
                break
            await asyncio.sleep(0.05)
        assert await all_stored(), "every record received and stored (archived the normal way)"
    finally:
        await client.stop()


async def test_a_resume_past_the_relay_cache_is_reported_not_silent(small_cache: ProcessMesh) -> None:
    (writer,) = small_cache.of_kind("subscription")
    writer, _ = await subscribe_on_writer([writer])
    edge = small_cache.of_kind("edge_peer")[0]
    client = relay_client()
    await client.start()
    try:
        info = await client.connect(_enode(edge))
        batch = envelopes(3 + 4 * SMALL_CACHE, topic=TOPIC)
        call = stub(writer).StreamEvents(
            pb.StreamEventsRequest(
                filter=pb.EventFilter(types=[pb.EVENT_TYPE_MESSAGE_RECEIVED]), after_sequence=0
            )
        )
        seen: dict[bytes, int] = {}
        await client.post(info.pubkey, batch[:3])
        last = await received_hashes(call, 3, seen)
        writer.stop(0, sig=signal.SIGKILL)
        await client.post(info.pubkey, batch[3:])  # more than the edge peer keeps for resumption
        for _ in range(600):  # a bounded wait until the edge peer accepted them all (not a timing claim)
            if edge.metric("edge_stream_envelopes_published_total") >= len(batch):
                break
            await asyncio.sleep(0.05)
        assert edge.metric("edge_stream_envelopes_published_total") >= len(batch)
        back = await asyncio.to_thread(restart, small_cache, writer)
        await asyncio.to_thread(
            back.logs.wait_for, lambda line: "cannot resume after sequence 3 of epoch" in line.text, 30
        )
        assert back.metric("mailmesh_subscription_feed_resume_misses_total", feed="edge") == 1
        resumed = stub(back).StreamEvents(
            pb.StreamEventsRequest(
                filter=pb.EventFilter(types=[pb.EVENT_TYPE_MESSAGE_RECEIVED]), after_sequence=last
            )
        )
        await received_hashes(resumed, 3 + SMALL_CACHE, seen)  # what the cache still held arrives ...
        assert set(seen) == {e.hash for e in batch[:3] + batch[-SMALL_CACHE:]}  # ... the rest is reported
        resumed.cancel()
    finally:
        await client.stop()
