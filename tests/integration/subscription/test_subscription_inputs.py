"""The subscription service's inputs over real gRPC and a real SQLite store, with in-process fakes of the
feeds: every feed resumes after the position committed with its data when the writer restarts (and says
so when it cannot), served history marks records stored whoever made them, PollRecords sees changes that
emit no event, and ListMessageRecords asks for one of the spec's identifiers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio
import pytest

from mailmesh.subscription.v1 import subscription_pb2 as pb
from msgstore.settings import StoreSettings
from msgstore.sqlite.store import SqliteMsgStore
from msgstore.types import Message, SendPriority, SendProgress, SendState
from services.subscription.positions import NO_POSITION, FeedPosition
from services.subscription.rules import SendUpdate
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
REQUEST = "cccccccc-0000-4000-8000-000000000001"


def env_hash(i: int) -> bytes:
    return i.to_bytes(32, "big")


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15.0) -> None:
    """Poll an async ``check`` every 10 ms; AssertionError after ``timeout`` s (a bound, not a sync)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def update(attempts: int, *, sending: bool = True, sent: bool = False) -> SendUpdate:
    progress = SendProgress(SendState.SENDING, SendPriority.NORMAL, attempts, 4, 0, False, 1_700_000_000.0)
    return SendUpdate(
        request_id=REQUEST,
        message_hash=b"\x05" * 32,
        pubsub_topic="/waku/2/rs/1/0",
        message=Message(payload=b"mine", content_topic="/app/1/other/proto", timestamp=5 * 10**9),
        sending=sending,
        sent=sent,
        stored=False,
        error=None,
        progress=progress,
        envelope_hash=env_hash(900),
        updated_at=0.0,
    )


async def test_a_restarted_writer_resumes_every_feed_after_its_committed_position(tmp_path: Path) -> None:
    fakes = FakeFeeds()
    env = subscription_env(tmp_path / "m.db")
    first = await start_subscription(env, fakes.feeds())
    try:
        await wait_until(lambda: first.is_writer, what="writer")
        await first.subscribe(CHAT)
        await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="edge feed opened")
        for i in range(3):
            fakes.edge.push(TOPIC, bytes([i]), 1_700_000_000 + i, env_hash(i + 1))
        fakes.send.push(update(1))
        fakes.send.push(update(2))
        fakes.served.serve(env_hash(777))  # nothing of ours: the position moves all the same
        records = first.deps.app.store.records
        await wait_until(lambda: len(fakes.served.requests) == 1, what="served feed opened")

        async def committed() -> bool:
            edge = FeedPosition.decode(await records.position("edge/fake-edge"))
            return edge == FeedPosition("epoch-1", 3) and await records.position("send") == b"2"

        await eventually(committed, what="edge and send positions committed with their records")
    finally:
        await first.stop()  # a stop commits what only moved positions (the served chunk)
    assert FeedPosition.decode(await _position(tmp_path, "history/fake-history")) == FeedPosition(
        "history-1", 1
    )

    second = await start_subscription(env, fakes.feeds())
    try:
        await wait_until(lambda: second.is_writer, what="writer after restart")
        await wait_until(lambda: len(fakes.edge.requests) == 2, what="edge feed reopened")
        await wait_until(lambda: len(fakes.send.resumes) == 2, what="send watch reopened")
        await wait_until(lambda: len(fakes.served.requests) == 2, what="served feed reopened")
        assert fakes.edge.requests[-1][1:] == ("epoch-1", 3)  # exactly after the last committed envelope
        assert fakes.send.resumes == [b"", b"2"]
        assert fakes.served.requests[-1] == ("history-1", 1)
        assert second.metric("mailmesh_subscription_feed_resume_misses_total", {"feed": "edge"}) is None
    finally:
        await second.stop()

    fakes.edge.epoch = "epoch-2"  # the edge peer restarted meanwhile: what it held after 3 is gone
    fakes.edge.cache.clear()
    third = await start_subscription(env, fakes.feeds())
    try:
        await wait_until(lambda: third.is_writer, what="writer after the edge peer's restart")
        await wait_until(
            lambda: third.metric("mailmesh_subscription_feed_resume_misses_total", {"feed": "edge"}) == 1,
            what="the missed resume counted",
        )
        await wait_until(lambda: third.deps.app.edges[0].stream_epoch == "epoch-2", what="edge feed live")
    finally:
        await third.stop()
    assert FeedPosition.decode(await _position(tmp_path, "edge/fake-edge")) == NO_POSITION


async def _position(tmp_path: Path, name: str) -> bytes | None:
    store = SqliteMsgStore(tmp_path / "m.db", StoreSettings())
    await store.open()
    try:
        return await store.records.position(name)
    finally:
        await store.close()


async def test_a_served_envelope_marks_its_records_stored_whoever_made_them(tmp_path: Path) -> None:
    fakes = FakeFeeds()  # store confirmation off: only the History API marks records stored here
    service = await start_subscription(subscription_env(tmp_path / "m.db"), fakes.feeds())
    try:
        await wait_until(lambda: service.is_writer, what="writer")
        await service.subscribe(CHAT)
        events = open_events(service, after=0, types=[pb.EVENT_TYPE_MESSAGE_STORED])
        await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="edge feed opened")
        fakes.edge.push(TOPIC, b"theirs", 1_700_000_000, env_hash(1))  # received, not sent by us
        fakes.send.push(update(1, sending=False, sent=True))  # sent by us, on a topic nobody monitors
        records = service.deps.app.store.records

        async def both_recorded() -> bool:
            return len(await records.by_envelope([env_hash(1), env_hash(900)])) == 2

        await eventually(both_recorded, what="the received and the sent record written")
        await wait_until(lambda: len(fakes.served.requests) == 1, what="served feed opened")
        fakes.served.serve(env_hash(1), env_hash(900), env_hash(5555))
        stored = await events.take(2)
        assert {e.record.envelope_hash for e in stored} == {env_hash(1), env_hash(900)}
        assert all(e.record.stored for e in stored)
        mine = await service.stub.GetMessageRecord(pb.GetMessageRecordRequest(request_id=REQUEST), timeout=10)
        assert mine.record.stored and mine.record.sent
        fakes.served.serve(env_hash(1))  # served again: already stored, nothing changes
        fakes.edge.push(TOPIC, b"later", 1_700_000_001, env_hash(2))

        async def later_recorded() -> bool:
            return bool(await records.by_envelope([env_hash(2)]))

        await eventually(later_recorded, what="the later record written")
        fakes.served.serve(env_hash(2))
        (later,) = await events.take(1)
        assert later.record.envelope_hash == env_hash(2)  # the repeat emitted nothing before it
        events.cancel()
    finally:
        await service.stop()


async def test_poll_records_reports_a_change_that_emits_no_event(tmp_path: Path) -> None:
    fakes = FakeFeeds()
    service = await start_subscription(subscription_env(tmp_path / "m.db"), fakes.feeds())
    try:
        await wait_until(lambda: service.is_writer, what="writer")
        flt = pb.RecordFilter(request_id=REQUEST)
        events = open_events(service, after=0, request_id=REQUEST)
        fakes.send.push(update(1))
        (created,) = await events.take(1)  # message:change: sending became true
        fakes.send.push(update(2))  # the second attempt: no flag changes, so no Messaging API event
        polled = pb.PollRecordsRequest(filter=flt, after_revision=created.record.revision)
        polled.wait.FromSeconds(30)
        reply = await service.stub.PollRecords(polled, timeout=40)
        (record,) = reply.records
        assert record.send_progress.attempts == 2 and record.revision > created.record.revision
        assert reply.last_revision == record.revision
        fakes.send.push(update(2, sending=False, sent=True))
        (sent, change) = await events.take(2)
        assert [sent.name, change.name] == ["message:sent", "message:change"]  # no revision entry streamed
        assert sent.sequence > record.revision
        events.cancel()
    finally:
        await service.stop()


async def test_listing_records_needs_one_of_the_spec_identifiers(tmp_path: Path) -> None:
    service = await start_subscription(subscription_env(tmp_path / "m.db"), FakeFeeds().feeds())
    try:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await service.list_records()
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "content_topic, subscription_id, request_id or message_hash" in (info.value.details() or "")
    finally:
        await service.stop()
