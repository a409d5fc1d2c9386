"""The subscription service over real gRPC and a real SQLite store, its feeds faked in-process.

Subscribe/Unsubscribe/List, NOT_FOUND texts, the receive path and its events in order, skip/take, the
send-side merge, the stored check (halted while Unhealthy), event replay, gaps and slow consumers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from mailmesh.subscription.v1 import subscription_pb2 as pb
from msgapi.config import RESERVED_SUBSCRIPTION_ID
from msgstore.types import HealthStatus, Message, MessageError, MessageErrorKind
from services.subscription.rules import SendUpdate
from tests.integration.subscription.subscription_support import (
    FakeFeeds,
    SubscriptionHandle,
    open_events,
    start_subscription,
    subscription_env,
    wait_until,
)
from wakucodec.contenttopic import content_topic_to_v1_topic

CHAT = "/app/1/chat/proto"
TOPIC = content_topic_to_v1_topic(CHAT)
E = pb


@pytest.fixture
def fakes() -> FakeFeeds:
    return FakeFeeds()


@pytest.fixture
async def service(tmp_path: Path, fakes: FakeFeeds) -> AsyncIterator[SubscriptionHandle]:
    handle = await start_subscription(subscription_env(tmp_path / "m.db"), fakes.feeds())
    await wait_until(lambda: handle.is_writer, what="writer lease")
    try:
        yield handle
    finally:
        await handle.stop()


def env_hash(i: int) -> bytes:
    return i.to_bytes(32, "big")


async def test_subscribe_gives_a_new_guid_each_call_and_lists_them(service: SubscriptionHandle) -> None:
    a = await service.subscribe(CHAT)
    b = await service.subscribe(CHAT)
    assert a != b and len(a) == 36 and a == a.lower()
    listed = (await service.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), timeout=10)).subscriptions
    assert [s.subscription_id for s in listed] == [a, b]
    assert list(listed[0].envelope_topics) == [TOPIC]
    assert listed[0].pubsub_topic == "/waku/2/rs/1/0"  # the default: the first configured shard


@pytest.mark.parametrize(
    ("pubsub_topic", "message"),
    [
        ("/waku/2/rs/16/32", "Cannot create subscription. clusterId 16 is not supported."),
        ("/waku/2/default-waku/proto", "Cannot create subscription. clusterId unknown is not supported."),
        ("/waku/2/rs/1/9", "Failed to send message. Target pubsubTopic '/waku/2/rs/1/9' not supported."),
    ],
)
async def test_subscribe_refuses_unserved_pubsub_topics_with_the_spec_texts(
    service: SubscriptionHandle, pubsub_topic: str, message: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await service.subscribe(CHAT, pubsub_topic=pubsub_topic)
    assert (info.value.code(), info.value.details()) == (grpc.StatusCode.NOT_FOUND, message)


async def test_subscribe_refuses_bad_content_topics(service: SubscriptionHandle) -> None:
    for topics in ((), ("not a topic",)):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await service.subscribe(*topics)
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_unsubscribe_unknown_inactive_and_reserved_ids_are_ignored(service: SubscriptionHandle) -> None:
    sid = await service.subscribe(CHAT)

    async def unsubscribe(s: str) -> bool:
        return (await service.stub.Unsubscribe(pb.UnsubscribeRequest(subscription_id=s), timeout=10)).removed

    assert await unsubscribe(sid) is True
    assert await unsubscribe(sid) is False
    assert await unsubscribe("00000000-0000-4000-8000-000000000000") is False
    assert await unsubscribe(RESERVED_SUBSCRIPTION_ID) is False
    listed = (await service.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), timeout=10)).subscriptions
    assert list(listed) == []


async def test_get_message_record_not_found_texts(service: SubscriptionHandle) -> None:
    cases = [
        (pb.GetMessageRecordRequest(request_id="abc"), "Message with requestId 'abc' not found"),
        (
            pb.GetMessageRecordRequest(message_hash=b"\x01" * 32),
            f"Message with hash '0x{'01' * 32}' not found",
        ),
        (pb.GetMessageRecordRequest(message_hash=b"\x01\x02"), "Message with hash '0x0102' not found"),
    ]
    for request, text in cases:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await service.stub.GetMessageRecord(request, timeout=10)
        assert (info.value.code(), info.value.details()) == (grpc.StatusCode.NOT_FOUND, text)


async def test_a_received_message_becomes_a_record_and_emits_received_then_change(
    service: SubscriptionHandle, fakes: FakeFeeds
) -> None:
    sid = await service.subscribe(CHAT)
    events = open_events(service, after=0)
    await wait_until(
        lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="feed opened with the topic"
    )
    sent = int(time.time())
    fakes.edge.push(TOPIC, b"hello", sent, env_hash(1))
    received, change = await events.take(2)
    assert (received.name, change.name) == ("message:received", "message:change")
    assert received.sequence < change.sequence
    record = change.record
    assert (record.received, record.origin, list(record.subscription_ids)) == (True, 2, [sid])
    assert (record.message.payload, record.message.content_topic, record.message.timestamp) == (
        b"hello",
        CHAT,
        sent * 10**9,
    )
    got = await service.stub.GetMessageRecord(
        pb.GetMessageRecordRequest(message_hash=record.message_hash), timeout=10
    )
    assert got.record.received and got.record.envelope_hash == env_hash(1)
    assert service.metric("mailmesh_subscription_records_written_total", {"origin": "subscription"}) == 1
    for name in ("message:received", "message:change"):
        assert service.metric("mailmesh_subscription_events_emitted_total", {"event": name}) == 1
    events.cancel()


async def test_unsubscribe_stops_delivery_at_once(service: SubscriptionHandle, fakes: FakeFeeds) -> None:
    gone = await service.subscribe(CHAT)
    kept = await service.subscribe(CHAT)
    events = open_events(service, after=0, types=[E.EVENT_TYPE_MESSAGE_RECEIVED])
    await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="feed opened")
    await service.stub.Unsubscribe(pb.UnsubscribeRequest(subscription_id=gone), timeout=10)
    fakes.edge.push(TOPIC, b"late", int(time.time()), env_hash(2))
    event = await events.next()  # the envelope was handled: the remaining subscription got it
    assert list(event.record.subscription_ids) == [kept]
    assert await service.list_records(subscription_id=gone) == []
    assert [r.message.payload for r in await service.list_records(subscription_id=kept)] == [b"late"]
    events.cancel()


async def test_skip_take_edge_cases(service: SubscriptionHandle, fakes: FakeFeeds) -> None:
    sid = await service.subscribe(CHAT)
    events = open_events(service, after=0, types=[E.EVENT_TYPE_MESSAGE_RECEIVED])
    await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="feed opened")
    for i in range(5):
        fakes.edge.push(TOPIC, bytes([i]), 1_700_000_000 + i, env_hash(10 + i))
    await events.take(5)
    events.cancel()
    every = await service.list_records(content_topic=CHAT)
    payloads = [r.message.payload for r in every]
    assert payloads == [bytes([i]) for i in range(5)]
    flts: list[dict[str, Any]] = [{"content_topic": CHAT}, {"subscription_id": sid}]
    for flt in flts:
        assert [r.message.payload for r in await service.list_records(**flt)] == payloads
        assert [r.message.payload for r in await service.list_records(skip=2, **flt)] == payloads[2:]
        assert [r.message.payload for r in await service.list_records(take=2, **flt)] == payloads[:2]
        assert [r.message.payload for r in await service.list_records(skip=1, take=3, **flt)] == payloads[1:4]
        assert [r.message.payload for r in await service.list_records(skip=3, take=10, **flt)] == payloads[3:]
        assert await service.list_records(take=0, **flt) == []
        assert await service.list_records(skip=5, **flt) == []
        assert await service.list_records(skip=99, take=1, **flt) == []
    assert await service.list_records(content_topic="/nobody/1/x/proto") == []
    assert await service.list_records(subscription_id="00000000-0000-4000-8000-000000000000") == []


async def test_send_statuses_merge_into_records_with_sent_after_sending(
    service: SubscriptionHandle, fakes: FakeFeeds
) -> None:
    events = open_events(service, after=0, request_id="dddddddd-0000-4000-8000-000000000004")
    base = dict(
        request_id="dddddddd-0000-4000-8000-000000000004",
        message_hash=b"\x07" * 32,
        pubsub_topic="/waku/2/rs/1/0",
        message=Message(payload=b"out", content_topic=CHAT, timestamp=5 * 10**9),
        stored=False,
        progress=None,
        envelope_hash=env_hash(70),
        updated_at=0.0,
    )
    error = MessageError(MessageErrorKind.NO_PEERS, "no Waku peer took it", attempt=1)
    fakes.send.push(SendUpdate(sending=True, sent=False, error=None, **base))  # type: ignore[arg-type]
    fakes.send.push(SendUpdate(sending=False, sent=False, error=error, **base))  # type: ignore[arg-type]
    fakes.send.push(SendUpdate(sending=False, sent=True, error=None, **base))  # type: ignore[arg-type]
    got = [(e.name, e.waku_api_name) for e in await events.take(5)]
    assert got == [
        ("message:change", ""),
        ("message:error", "message:send-error"),
        ("message:change", ""),
        ("message:sent", "message:send-propagated"),
        ("message:change", ""),
    ]
    record = events.events[-1].record
    assert (record.sent, record.sending, record.HasField("error"), record.origin) == (True, False, False, 1)
    request_id = "dddddddd-0000-4000-8000-000000000004"
    by_id = await service.stub.GetMessageRecord(pb.GetMessageRecordRequest(request_id=request_id), timeout=10)
    assert by_id.record.message_hash == b"\x07" * 32
    events.cancel()


async def test_health_changes_become_events_with_both_vocabularies(
    service: SubscriptionHandle, fakes: FakeFeeds
) -> None:
    events = open_events(service, after=0, types=[E.EVENT_TYPE_HEALTH_CHANGE])
    await wait_until(lambda: service.deps.app.health.status is not None, what="first health report")
    fakes.health.set(HealthStatus.UNHEALTHY)
    event = await events.next()
    assert (event.name, event.waku_api_name) == ("health:change", "health:connection-status")
    assert (event.health.status, event.health.previous) == (1, 3)
    assert (event.health.connection_status, event.health.previous_connection_status) == (1, 3)
    assert service.metric("mailmesh_subscription_events_emitted_total", {"event": "health:change"}) == 1
    events.cancel()


async def test_replay_after_a_sequence_then_live_and_poll_events(
    service: SubscriptionHandle, fakes: FakeFeeds
) -> None:
    await service.subscribe(CHAT)
    live = open_events(service, after=0)
    await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="feed opened")
    fakes.edge.push(TOPIC, b"a", 1_700_000_000, env_hash(30))
    first = await live.take(2)
    replay = open_events(service, after=first[0].sequence)
    assert (await replay.next()).sequence == first[1].sequence
    fakes.edge.push(TOPIC, b"b", 1_700_000_001, env_hash(31))
    more = await live.take(2)
    assert [e.sequence for e in await replay.take(2)] == [e.sequence for e in more]
    polled = await service.stub.PollEvents(pb.PollEventsRequest(after_sequence=0, limit=3), timeout=10)
    assert [e.sequence for e in polled.events] == [e.sequence for e in (first + more)[:3]]
    assert polled.last_sequence == polled.events[-1].sequence
    live.cancel()
    replay.cancel()


async def test_poll_events_waits_for_the_next_event_and_poll_records_reports_changed_records(
    service: SubscriptionHandle, fakes: FakeFeeds
) -> None:
    sid = await service.subscribe(CHAT)
    await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="feed opened")
    head = await service.stub.PollEvents(pb.PollEventsRequest(), timeout=10)  # nothing yet: the head, at once
    assert list(head.events) == []
    wait = pb.PollEventsRequest(after_sequence=head.last_sequence, limit=1)
    wait.wait.FromSeconds(30)
    waiting = asyncio.ensure_future(service.stub.PollEvents(wait, timeout=40))
    records_wait = pb.PollRecordsRequest(
        filter=pb.RecordFilter(subscription_id=sid), after_revision=head.last_sequence
    )
    records_wait.wait.FromSeconds(30)
    waiting_records = asyncio.ensure_future(service.stub.PollRecords(records_wait, timeout=40))
    fakes.edge.push(TOPIC, b"polled", 1_700_000_000, env_hash(40))
    first = await waiting
    assert [e.name for e in first.events] == ["message:received"]
    assert first.last_sequence == first.events[0].sequence
    changed = await waiting_records
    assert [r.message.payload for r in changed.records] == [b"polled"]
    assert changed.last_revision == changed.records[0].revision
    again = await service.stub.PollRecords(
        pb.PollRecordsRequest(
            filter=pb.RecordFilter(subscription_id=sid), after_revision=changed.last_revision
        ),
        timeout=10,
    )
    assert list(again.records) == []  # nothing changed since


async def test_two_subscriptions_on_one_topic_share_one_record_and_its_events(
    service: SubscriptionHandle, fakes: FakeFeeds
) -> None:
    a = await service.subscribe(CHAT)
    b = await service.subscribe(CHAT)
    events = open_events(service, after=0)
    await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="feed opened")
    fakes.edge.push(TOPIC, b"both", 1_700_000_000, env_hash(50))
    fakes.edge.push(TOPIC, b"next", 1_700_000_001, env_hash(51))
    got = await events.take(4)
    assert [e.name for e in got] == ["message:received", "message:change"] * 2
    assert [list(e.record.subscription_ids) for e in got] == [[a, b]] * 4
    for sid in (a, b):
        assert [r.message.payload for r in await service.list_records(subscription_id=sid)] == [
            b"both",
            b"next",
        ]
    events.cancel()
