"""What survives: events resumable across a restart, gap answers past retention, slow consumers ended and
resumable, the stored check (halted while Unhealthy), and two replicas on one store (reads everywhere, a
writer taken over when it stops)."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import grpc.aio
import pytest

from mailmesh.subscription.v1 import subscription_pb2 as pb
from msgstore.types import HealthStatus
from tests.integration.subscription.subscription_support import (
    EventStream,
    FakeFeeds,
    open_events,
    start_subscription,
    subscription_env,
    wait_until,
)
from wakucodec.contenttopic import content_topic_to_v1_topic

CHAT = "/app/1/chat/proto"
TOPIC = content_topic_to_v1_topic(CHAT)


def env_hash(i: int) -> bytes:
    return i.to_bytes(32, "big")


async def feed_opened(fakes: FakeFeeds) -> None:
    await wait_until(
        lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="feed opened with the topic"
    )


async def test_events_resume_after_a_restart_on_the_same_file_with_nothing_missing(tmp_path: Path) -> None:
    fakes = FakeFeeds()
    env = subscription_env(tmp_path / "m.db")
    first = await start_subscription(env, fakes.feeds())
    await wait_until(lambda: first.is_writer, what="writer")
    await first.subscribe(CHAT)
    stream = open_events(first, after=0)
    await feed_opened(fakes)
    for i in range(3):
        fakes.edge.push(TOPIC, bytes([i]), 1_700_000_000 + i, env_hash(i + 1))
    seen = await stream.take(2)  # the consumer has read the first envelope's two events only
    await wait_until(lambda: first.deps.app.hub.last_sequence >= seen[-1].sequence + 4, what="all committed")
    committed = first.deps.app.hub.last_sequence
    stream.cancel()
    await first.stop()
    opened = len(fakes.edge.requests)

    fakes.edge.epoch = "epoch-2"  # a new edge-peer process too: the new follower starts live there
    second = await start_subscription(env, fakes.feeds())
    try:
        await wait_until(lambda: second.is_writer, what="writer after restart")
        resumed = open_events(second, after=seen[-1].sequence)
        rest = await resumed.take(4)
        assert [e.name for e in rest] == ["message:received", "message:change"] * 2
        assert [e.record.message.payload for e in rest[1::2]] == [b"\x01", b"\x02"]
        assert rest[-1].sequence == committed
        await wait_until(lambda: len(fakes.edge.requests) > opened, what="the new writer's feed opened")
        fakes.edge.push(TOPIC, b"\x03", 1_700_000_010, env_hash(9))
        live = await resumed.take(2)
        assert live[0].sequence > committed and live[1].record.message.payload == b"\x03"
        resumed.cancel()
    finally:
        await second.stop()


async def test_a_resume_point_older_than_retention_is_out_of_range_with_the_oldest(tmp_path: Path) -> None:
    fakes = FakeFeeds()
    clock = [time.time()]
    from prometheus_client import CollectorRegistry

    from services.subscription.config import Config
    from services.subscription.server import build, connect

    cfg = Config.from_env(subscription_env(tmp_path / "m.db", MSGSTORE_EVENT_RETENTION_SECONDS="600"))
    deps = connect(cfg, feeds=fakes.feeds(), registry=CollectorRegistry(), clock=lambda: clock[0])
    mesh = build(cfg, deps)
    await mesh.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}")
    stub = pb_grpc_stub(channel)
    try:
        await wait_until(lambda: deps.app.recorder.is_writer, what="writer")
        await stub.Subscribe(pb.SubscribeRequest(content_topics=[CHAT]), timeout=10)
        await feed_opened(fakes)
        fakes.edge.push(TOPIC, b"old", 1_700_000_000, env_hash(1))
        await wait_until(lambda: deps.app.hub.last_sequence > 0, what="events committed")
        head = deps.app.hub.last_sequence
        clock[0] += 601  # every event is now older than the retention window
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.PollEvents(pb.PollEventsRequest(after_sequence=1), timeout=10)
        assert info.value.code() is grpc.StatusCode.OUT_OF_RANGE
        assert dict(info.value.trailing_metadata() or ())["oldest"] == str(head + 1)
        call = stub.StreamEvents(pb.StreamEventsRequest(after_sequence=1))
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call.read()
        assert info.value.code() is grpc.StatusCode.OUT_OF_RANGE
        everything = await stub.PollEvents(pb.PollEventsRequest(after_sequence=0), timeout=10)
        assert list(everything.events) == []  # 0 = everything retained: not an error
    finally:
        await channel.close()
        await mesh.stop(grace=2.0)


def pb_grpc_stub(channel: grpc.aio.Channel):  # type: ignore[no-untyped-def]
    from mailmesh.subscription.v1 import subscription_pb2_grpc

    return subscription_pb2_grpc.SubscriptionServiceStub(channel)


async def test_a_slow_consumer_is_ended_with_resource_exhausted_and_resumes(tmp_path: Path) -> None:
    fakes = FakeFeeds()
    service = await start_subscription(
        subscription_env(tmp_path / "m.db", SUBSCRIPTION_CONSUMER_BUFFER="16"), fakes.feeds()
    )
    try:
        await wait_until(lambda: service.is_writer, what="writer")
        await service.subscribe(CHAT)
        # Without BDP probing the HTTP/2 window stays at 64 KiB, so the server's writes block early and the
        # hub's buffer (16 events) is what fills up.
        slow_channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{service.mesh.port}", options=[("grpc.http2.bdp_probe", 0)]
        )
        stream = EventStream(
            pb_grpc_stub(slow_channel).StreamEvents(pb.StreamEventsRequest(after_sequence=0))
        )
        await feed_opened(fakes)
        fakes.edge.push(TOPIC, b"\x00", 1_700_000_000, env_hash(1))
        await stream.take(2)  # the stream is live; now stop reading while big events pile up
        count = 60
        for i in range(count):
            fakes.edge.push(TOPIC, bytes([i]) * 60_000, 1_700_000_001 + i, env_hash(100 + i))
        hub = service.deps.app.hub
        # Overflowed: still registered while its handler is blocked in a gRPC write, gone once it ended.
        await wait_until(
            lambda: hub.overflowed == 1 or hub.consumers == 0, what="the slow consumer overflowed"
        )
        last = stream.events[-1].sequence
        with pytest.raises(grpc.aio.AioRpcError) as info:
            while True:
                last = (await stream.next()).sequence
        assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        resumed = open_events(service, after=last)
        got = stream.events + await resumed.take(2 * (count + 1) - len(stream.events))
        assert len({e.sequence for e in got}) == 2 * (count + 1)  # nothing missing, nothing twice
        resumed.cancel()
        await slow_channel.close()
    finally:
        await service.stop()


async def test_stored_check_marks_archived_records_and_halts_while_unhealthy(tmp_path: Path) -> None:
    fakes = FakeFeeds()
    env = subscription_env(
        tmp_path / "m.db", MSGAPI_STORE_CONFIRMATION="true", MSGAPI_STORE_CHECK_INTERVAL_SECONDS="3600"
    )
    service = await start_subscription(env, fakes.feeds())
    try:
        await wait_until(lambda: service.is_writer, what="writer")
        app = service.deps.app
        await service.subscribe(CHAT)
        stream = open_events(
            service, after=0, types=[pb.EVENT_TYPE_MESSAGE_RECEIVED, pb.EVENT_TYPE_MESSAGE_STORED]
        )
        await feed_opened(fakes)
        fakes.edge.push(TOPIC, b"keep", 1_700_000_000, env_hash(5))
        received = await stream.next()
        assert received.name == "message:received" and not received.record.stored
        fakes.lookup.archived.add(env_hash(5))
        fakes.health.set(HealthStatus.UNHEALTHY)
        await wait_until(lambda: app.health.unhealthy, what="unhealthy seen")
        await app.stored.tick()
        assert fakes.lookup.calls == 0  # halted (MESSAGING-API "Acknowledgements")
        fakes.health.set(HealthStatus.MINIMALLY_HEALTHY)
        await wait_until(lambda: not app.health.unhealthy, what="healthy again")
        await app.stored.tick()
        stored = await stream.next()
        assert stored.name == "message:stored" and stored.record.stored
        assert stored.record.message_hash == received.record.message_hash
        await app.stored.tick()  # once stored, never asked about again
        assert fakes.lookup.calls == 1
        stream.cancel()
    finally:
        await service.stop()


async def test_two_replicas_read_alike_and_the_second_takes_over_writing(tmp_path: Path) -> None:
    fakes_a, fakes_b = FakeFeeds(), FakeFeeds()
    env = subscription_env(tmp_path / "m.db")
    a = await start_subscription({**env, "SUBSCRIPTION_REPLICA_ID": "a"}, fakes_a.feeds())
    await wait_until(lambda: a.is_writer, what="a writes")
    b = await start_subscription({**env, "SUBSCRIPTION_REPLICA_ID": "b"}, fakes_b.feeds())
    try:
        assert not b.is_writer
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await b.subscribe(CHAT)
        assert info.value.code() is grpc.StatusCode.UNAVAILABLE
        sid = await a.subscribe(CHAT)
        on_b = open_events(b, after=0)
        await feed_opened(fakes_a)
        fakes_a.edge.push(TOPIC, b"x", 1_700_000_000, env_hash(1))
        events = await on_b.take(2)  # written by a, streamed by b from the shared event log
        assert events[1].record.message.payload == b"x"
        listed = (await b.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), timeout=10)).subscriptions
        assert [s.subscription_id for s in listed] == [sid]
        await a.stop()
        await wait_until(lambda: b.is_writer, timeout=10, what="b takes over")
        await feed_opened(fakes_b)  # b follows the subscriptions a created
        fakes_b.edge.push(TOPIC, b"y", 1_700_000_001, env_hash(2))
        more = await on_b.take(2)
        assert more[1].record.message.payload == b"y" and more[0].sequence > events[1].sequence
        on_b.cancel()
    finally:
        await a.stop()
        await b.stop()
