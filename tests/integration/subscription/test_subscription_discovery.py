"""Served history from every history-query replica behind a dns: name, over real gRPC: two real replicas
in front of one real archive, the name resolved (an injected resolver, as a headless Service's DNS would)
to both; what either replica's Query delivered marks its records stored. Re-resolution (driven by hand)
follows a replica that replaced another. The edge feed is a fake that makes the records."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc.aio
from prometheus_client import CollectorRegistry

from mailmesh.archive.v1 import archive_pb2_grpc
from mailmesh.history.v1 import history_pb2_grpc
from mailmesh.subscription.v1 import subscription_pb2 as pb
from services.subscription.app import Feeds
from services.subscription.clients import Channels
from services.subscription.config import Config
from services.subscription.server import served_discovery
from tests.integration.history.history_support import (
    BASE,
    HistoryHandle,
    make_envelopes,
    put,
    query,
    start_archive,
    start_history,
)
from tests.integration.subscription.subscription_support import (
    FakeFeeds,
    open_events,
    start_subscription,
    subscription_env,
    wait_until,
)
from wakucodec.contenttopic import content_topic_to_v1_topic

CHAT = "/app/1/chat/proto"
TOPIC = content_topic_to_v1_topic(CHAT)
HISTORY = "dns:///history-query-headless.mesh.svc:50054"
SECRET = b"\x05" * 32


class Zone:
    """The headless Service's records as the test sets them (each replica on its own port here)."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        assert (host, port) == ("history-query-headless.mesh.svc", 50054)
        return list(self.addresses)


def stub(channel: grpc.aio.Channel) -> Any:
    return history_pb2_grpc.HistoryQueryServiceStub(channel)


async def test_what_any_history_replica_behind_a_dns_name_served_becomes_stored(tmp_path: Path) -> None:
    archive = await start_archive(tmp_path / "archive.db")
    corpus = make_envelopes([BASE, BASE + 1, BASE + 2], TOPIC, tag=3)
    async with grpc.aio.insecure_channel(archive.address) as channel:
        await put(archive_pb2_grpc.ArchiveServiceStub(channel), corpus)
    replicas: list[HistoryHandle] = [await start_history(archive.address, [SECRET]) for _ in range(2)]
    zone = Zone(*(r.address for r in replicas))
    env = subscription_env(
        tmp_path / "m.db", SUBSCRIPTION_HISTORY_ADDR=HISTORY, SUBSCRIPTION_DISCOVERY_INTERVAL_SECONDS="3600"
    )
    channels = Channels(registry=CollectorRegistry())
    discovery = served_discovery(Config.from_env(env), channels, zone)
    fakes = FakeFeeds()  # store confirmation off: only served history marks records stored
    service = await start_subscription(
        env, Feeds([fakes.edge], fakes.health, fakes.lookup, fakes.send, discovery)
    )
    try:
        await wait_until(lambda: service.is_writer, what="writer")
        followers = service.deps.app.served
        await wait_until(
            lambda: sorted(followers.followers) == sorted(r.address for r in replicas), what="both followed"
        )
        await service.subscribe(CHAT)
        events = open_events(
            service, after=0, types=[pb.EVENT_TYPE_MESSAGE_RECEIVED, pb.EVENT_TYPE_MESSAGE_STORED]
        )
        await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="edge feed opened")
        for e in corpus:
            fakes.edge.push(TOPIC, e.data, e.sent, e.hash)
        received = await events.take(3)
        assert {e.record.envelope_hash for e in received} == {e.hash for e in corpus}

        # Each replica serves one envelope: both become stored (one balanced channel would see one).
        for replica, e in zip(replicas, corpus, strict=False):
            async with grpc.aio.insecure_channel(replica.address) as channel:
                page = await query(stub(channel), lower=e.sent, upper=e.sent, topics=[TOPIC])
                assert page.envelopes == [e.raw]
        stored = await events.take(2)
        assert {e.record.envelope_hash for e in stored} == {corpus[0].hash, corpus[1].hash}
        assert all(e.record.stored for e in stored)

        # The first replica replaced by a third: the third is followed after the next resolution.
        await replicas[0].stop()
        replicas.append(await start_history(archive.address, [SECRET]))
        zone.addresses = [replicas[1].address, replicas[2].address]
        assert await followers.instances.refresh()
        assert sorted(followers.followers) == sorted([replicas[1].address, replicas[2].address])
        async with grpc.aio.insecure_channel(replicas[2].address) as channel:
            await query(stub(channel), lower=corpus[2].sent, upper=corpus[2].sent, topics=[TOPIC])
        (last,) = await events.take(1)
        assert last.record.envelope_hash == corpus[2].hash and last.record.stored
        events.cancel()
    finally:
        await service.stop()
        await channels.close()
        for replica in replicas[1:]:
            await replica.stop()
        await archive.stop()
