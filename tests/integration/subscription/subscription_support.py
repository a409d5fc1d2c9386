"""Helpers for the subscription service's integration tests: the service on port 0 over a SQLite store,
in-process fakes of the feeds it follows, and small readers of its streams."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc.aio
from prometheus_client import CollectorRegistry

from mailmesh.subscription.v1 import subscription_pb2, subscription_pb2_grpc
from meshcore import MeshServer, Unavailable
from msgstore.types import HealthStatus
from services.subscription.app import Feeds
from services.subscription.config import Config
from services.subscription.ports import FeedBatch, FeedEnvelope, SendFeedItem, ServedBatch
from services.subscription.rules import SendUpdate
from services.subscription.server import Deps, build, connect

#: Short lease and tail so takeovers and cross-replica reads happen within a test's patience.
LEASE_S = "1.5"
TAIL_S = "0.05"


def subscription_env(db: Path, edge_peers: Sequence[str] = ("127.0.0.1:1",), **extra: str) -> dict[str, str]:
    """SUBSCRIPTION_* / MSGAPI_* / MSGSTORE_* variables of a test instance: port 0, no metrics port."""
    env = {
        "SUBSCRIPTION_GRPC_HOST": "127.0.0.1",
        "SUBSCRIPTION_GRPC_PORT": "0",
        "SUBSCRIPTION_METRICS_PORT": "-1",
        "SUBSCRIPTION_SHUTDOWN_GRACE_SECONDS": "5",
        "SUBSCRIPTION_EDGE_ADDR": ",".join(edge_peers),
        "SUBSCRIPTION_WRITER_LEASE_SECONDS": LEASE_S,
        "SUBSCRIPTION_TAIL_INTERVAL_SECONDS": TAIL_S,
        "MSGSTORE_BACKEND": "sqlite",
        "MSGSTORE_SQLITE_PATH": str(db),
        "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "0.2",
    }
    env.update(extra)
    return env


async def wait_until(condition: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    """Poll ``condition`` every 10 ms; AssertionError after ``timeout`` s (a bounded wait, not sync)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


# ---------------------------------------------------------------------------------------------- fakes


@dataclass
class FakeEdgeFeed:
    """An edge peer's feed: test-pushed envelopes, replayed after a resume point as the relay cache."""

    target: str = "fake-edge"
    epoch: str = "epoch-1"
    cache: list[FeedEnvelope] = field(default_factory=list)
    requests: list[tuple[tuple[bytes, ...], str, int]] = field(default_factory=list)
    fail_next: int = 0
    """Streams to fail with UNAVAILABLE right after they open."""
    _pushed: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, topic: bytes, data: bytes, sent: int, envelope_hash: bytes) -> FeedEnvelope:
        envelope = FeedEnvelope(len(self.cache) + 1, envelope_hash, topic, data, sent, time.time())
        self.cache.append(envelope)
        self._pushed.set()
        return envelope

    async def stream(
        self, topics: Sequence[bytes], resume_epoch: str, after_sequence: int
    ) -> AsyncIterator[FeedBatch]:
        self.requests.append((tuple(topics), resume_epoch, after_sequence))
        if self.fail_next:
            self.fail_next -= 1
            raise Unavailable("fake edge peer down")
        # As the edge peer's feed: no epoch = live; this epoch = after the point; another = the whole cache.
        resumed = resume_epoch == self.epoch
        position = after_sequence if resumed else (len(self.cache) if not resume_epoch else 0)
        yield FeedBatch(self.epoch, resumed, [])
        while True:
            fresh = [e for e in self.cache[position:] if e.topic in topics]
            position = len(self.cache)
            if fresh:
                yield FeedBatch(self.epoch, False, fresh)
            self._pushed.clear()
            await self._pushed.wait()


@dataclass
class FakeHealthFeed:
    """WatchHealth: the current status, then every status set by the test."""

    status: HealthStatus = HealthStatus.HEALTHY
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def set(self, status: HealthStatus) -> None:
        self.status = status
        self._changed.set()

    async def watch(self) -> AsyncIterator[HealthStatus]:
        yield self.status
        while True:
            self._changed.clear()
            await self._changed.wait()
            yield self.status


@dataclass
class FakeLookup:
    """Lookup: the envelope hashes the test says are archived."""

    archived: set[bytes] = field(default_factory=set)
    calls: int = 0

    async def stored(self, envelope_hashes: Sequence[bytes]) -> set[bytes]:
        self.calls += 1
        return {h for h in envelope_hashes if h in self.archived}


@dataclass
class FakeSendFeed:
    """WatchSendStatuses: changes pushed by the test, replayed after a resume position (the change count
    as decimal bytes; empty = from the start); ListSendStatuses: each request's latest status."""

    changes: list[SendUpdate] = field(default_factory=list)
    resumes: list[bytes] = field(default_factory=list)
    _pushed: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, update: SendUpdate) -> int:
        self.changes.append(update)
        self._pushed.set()
        return len(self.changes)

    async def watch(self, after_position: bytes) -> AsyncIterator[SendFeedItem]:
        self.resumes.append(after_position)
        position = int(after_position or b"0")
        while True:
            while position < len(self.changes):
                position += 1
                yield SendFeedItem(str(position).encode(), self.changes[position - 1])
            self._pushed.clear()
            await self._pushed.wait()

    async def statuses(self) -> AsyncIterator[SendUpdate]:
        latest = {u.request_id: u for u in self.changes}
        for update in latest.values():
            yield update


@dataclass
class FakeServedFeed:
    """A history-query instance's WatchServed: chunks of envelope hashes served as the test says, kept
    (the whole "ring") for resumes within this epoch; another epoch replays them all, not resumed."""

    target: str = "fake-history"
    epoch: str = "history-1"
    chunks: list[list[bytes]] = field(default_factory=list)
    requests: list[tuple[str, int]] = field(default_factory=list)
    _served: asyncio.Event = field(default_factory=asyncio.Event)

    def serve(self, *envelope_hashes: bytes) -> int:
        self.chunks.append(list(envelope_hashes))
        self._served.set()
        return len(self.chunks)

    async def watch(self, resume_epoch: str, after_sequence: int) -> AsyncIterator[ServedBatch]:
        self.requests.append((resume_epoch, after_sequence))
        resumed = resume_epoch == self.epoch
        position = after_sequence if resumed else (len(self.chunks) if not resume_epoch else 0)
        yield ServedBatch(self.epoch, resumed, [])
        while True:
            fresh = [(n + 1, self.chunks[n]) for n in range(position, len(self.chunks))]
            position = len(self.chunks)
            if fresh:
                yield ServedBatch(self.epoch, False, fresh)
            self._served.clear()
            await self._served.wait()


@dataclass
class FakeFeeds:
    """One of each fake."""

    edge: FakeEdgeFeed = field(default_factory=FakeEdgeFeed)
    health: FakeHealthFeed = field(default_factory=FakeHealthFeed)
    lookup: FakeLookup = field(default_factory=FakeLookup)
    send: FakeSendFeed = field(default_factory=FakeSendFeed)
    served: FakeServedFeed = field(default_factory=FakeServedFeed)

    def feeds(self) -> Feeds:
        return Feeds([self.edge], self.health, self.lookup, self.send, [self.served])


# ---------------------------------------------------------------------------------------------- service


@dataclass
class SubscriptionHandle:
    """A running subscription service and a channel to it."""

    cfg: Config
    deps: Deps
    mesh: MeshServer
    registry: CollectorRegistry
    channel: grpc.aio.Channel
    stopped: bool = False

    @property
    def stub(self) -> subscription_pb2_grpc.SubscriptionServiceAsyncStub:
        return subscription_pb2_grpc.SubscriptionServiceStub(self.channel)

    @property
    def is_writer(self) -> bool:
        return self.deps.app.recorder.is_writer

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, labels or {})

    async def subscribe(self, *content_topics: str, pubsub_topic: str = "") -> str:
        reply = await self.stub.Subscribe(
            subscription_pb2.SubscribeRequest(pubsub_topic=pubsub_topic, content_topics=content_topics),
            timeout=10,
        )
        return reply.subscription_id

    async def list_records(self, skip: int | None = None, take: int | None = None, **flt: Any) -> list[Any]:
        request = subscription_pb2.ListMessageRecordsRequest(filter=subscription_pb2.RecordFilter(**flt))
        if skip is not None:
            request.skip = skip
        if take is not None:
            request.take = take
        call = self.stub.ListMessageRecords(request, timeout=10)
        return [r async for chunk in call for r in chunk.records]

    async def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        await self.channel.close()
        await self.mesh.stop(grace=2.0)


async def start_subscription(env: dict[str, str], feeds: Feeds | None = None) -> SubscriptionHandle:
    """Connect, build and start the service the way __main__ does (private registry; fakes if given)."""
    cfg = Config.from_env(env)
    registry = CollectorRegistry()
    deps = connect(cfg, feeds=feeds, registry=registry)
    mesh = build(cfg, deps)
    await mesh.start()
    return SubscriptionHandle(cfg, deps, mesh, registry, grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}"))


class EventStream:
    """A StreamEvents call read event by event."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.events: list[subscription_pb2.Event] = []

    async def next(self, timeout: float = 10.0) -> subscription_pb2.Event:
        reply = await asyncio.wait_for(self.call.read(), timeout)
        assert reply is not grpc.aio.EOF, "stream ended"
        self.events.append(reply.event)
        return reply.event  # type: ignore[no-any-return]

    async def take(self, count: int) -> list[subscription_pb2.Event]:
        return [await self.next() for _ in range(count)]

    def cancel(self) -> None:
        self.call.cancel()


def open_events(handle: SubscriptionHandle, after: int | None = None, **flt: Any) -> EventStream:
    """StreamEvents, optionally resumed after a sequence."""
    request = subscription_pb2.StreamEventsRequest(filter=subscription_pb2.EventFilter(**flt))
    if after is not None:
        request.after_sequence = after
    return EventStream(handle.stub.StreamEvents(request))
