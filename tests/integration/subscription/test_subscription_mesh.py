"""The subscription service against the real mesh: a real archive, ingest and history-query over SQLite, a
real edge peer (devp2p + gRPC), the real health service, and a real wakunode RLPx peer posting envelopes.

A Waku peer's envelope on a subscribed topic becomes a `received` record with `message:received` then
`message:change`, is archived the normal way (edge peer → ingest → archive) and then marked `stored` by the
recurring check through HistoryQueryService.Lookup (`message:stored`, `message:change`); the health service's
transition reaches the event log as `health:change`; unsubscribing stops delivery.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mailmesh.subscription.v1 import subscription_pb2 as pb
from tests.integration.edge_peer.edge_peer_support import Edge, envelopes, relay_client, start_edge, stop_edge
from tests.integration.health.health_support import HealthHandle, start_health
from tests.integration.history.history_support import (
    ArchiveHandle,
    HistoryHandle,
    start_archive,
    start_history,
)
from tests.integration.ingest.ingest_support import IngestHandle, start_ingest
from tests.integration.subscription.subscription_support import (
    SubscriptionHandle,
    open_events,
    start_subscription,
    subscription_env,
    wait_until,
)
from wakunode.client import WakuClient

TOPIC = b"\x0a\x0b\x0c\x0d"
BRIDGED = "/waku/1/0x0a0b0c0d/rfc26"
MESSAGE_EVENTS = [
    pb.EVENT_TYPE_MESSAGE_RECEIVED,
    pb.EVENT_TYPE_MESSAGE_STORED,
    pb.EVENT_TYPE_MESSAGE_CHANGE,
]


@dataclass
class Mesh:
    archive: ArchiveHandle
    ingest: IngestHandle
    history: HistoryHandle
    edge: Edge
    health: HealthHandle
    service: SubscriptionHandle
    client: WakuClient


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[Mesh]:
    archive = await start_archive(tmp_path / "archive.db")
    ingest = await start_ingest(archive.address, INGEST_MIN_POW="0")
    history = await start_history(archive.address, [b"\x05" * 32])
    home = tmp_path / "edge"
    home.mkdir()
    ingest_addr = f"127.0.0.1:{ingest.mesh.port}"
    edge = await start_edge(home, ingest_addr, history.address)
    edge_addr = f"127.0.0.1:{edge.mesh.port}"
    health = await start_health(
        [edge_addr], [archive.address], HEALTH_MINIMALLY_HEALTHY_PEERS="1", HEALTH_HEALTHY_PEERS="1"
    )
    env = subscription_env(
        tmp_path / "messaging.db",
        [edge_addr],
        SUBSCRIPTION_HISTORY_ADDR=history.address,
        SUBSCRIPTION_HEALTH_ADDR=f"127.0.0.1:{health.mesh.port}",
        MSGAPI_STORE_CONFIRMATION="true",
        MSGAPI_STORE_CHECK_INTERVAL_SECONDS="0.2",
    )
    service = await start_subscription(env)
    client = relay_client()
    await client.start()
    try:
        await wait_until(lambda: service.is_writer, what="writer lease")
        yield Mesh(archive, ingest, history, edge, health, service, client)
    finally:
        await client.stop()
        await service.stop()
        await health.stop()
        await stop_edge(edge)
        await history.stop()
        await ingest.stop()
        await archive.stop()


async def feed_live(mesh: Mesh) -> None:
    """The edge peer's stream answered (its first message names the epoch): envelopes from now on reach us."""
    follower = mesh.service.deps.app.edges[0]
    await wait_until(lambda: follower.stream_epoch != "", what="StreamEnvelopes established")


async def test_a_peer_message_is_received_then_archived_and_marked_stored(mesh: Mesh) -> None:
    sid = await mesh.service.subscribe(BRIDGED)
    events = open_events(mesh.service, after=0, types=MESSAGE_EVENTS)
    await feed_live(mesh)
    info = await mesh.client.connect(mesh.edge.enode)
    (envelope,) = envelopes(1, topic=TOPIC)
    await mesh.client.post(info.pubkey, [envelope])
    received, change, stored, change2 = await events.take(4)
    assert [e.name for e in (received, change, stored, change2)] == [
        "message:received",
        "message:change",
        "message:stored",
        "message:change",
    ]
    assert received.sequence < change.sequence < stored.sequence < change2.sequence
    record = change2.record
    assert (record.received, record.stored, list(record.subscription_ids)) == (True, True, [sid])
    assert (record.message.payload, record.message.content_topic) == (envelope.data, BRIDGED)
    assert record.message.timestamp == envelope.sent * 10**9
    assert record.envelope_hash == envelope.hash
    listed = await mesh.service.list_records(subscription_id=sid)
    assert [r.message_hash for r in listed] == [record.message_hash]
    events.cancel()


async def test_health_transitions_reach_the_event_log(mesh: Mesh) -> None:
    events = open_events(mesh.service, after=0, types=[pb.EVENT_TYPE_HEALTH_CHANGE])
    await wait_until(lambda: mesh.service.deps.app.health.status is not None, what="first health report")
    await mesh.client.connect(mesh.edge.enode)  # one peer: Healthy with these thresholds
    event = await events.next(timeout=20)
    assert (event.health.previous, event.health.status) == (1, 3)  # Unhealthy -> Healthy
    assert event.waku_api_name == "health:connection-status"
    events.cancel()


async def test_unsubscribe_stops_delivery_from_the_peer(mesh: Mesh) -> None:
    gone = await mesh.service.subscribe(BRIDGED)
    kept = await mesh.service.subscribe(BRIDGED)
    events = open_events(mesh.service, after=0, types=[pb.EVENT_TYPE_MESSAGE_RECEIVED])
    await feed_live(mesh)
    await mesh.service.stub.Unsubscribe(pb.UnsubscribeRequest(subscription_id=gone), timeout=10)
    info = await mesh.client.connect(mesh.edge.enode)
    await mesh.client.post(info.pubkey, envelopes(1, topic=TOPIC))
    event = await events.next()
    assert list(event.record.subscription_ids) == [kept]
    assert await mesh.service.list_records(subscription_id=gone) == []
    events.cancel()
