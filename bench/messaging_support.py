"""Pieces of the messaging suite (``bench/messaging.py``): the feeds the subscription service follows, played
by this process, 100 event consumers in a process of their own, and the 1 M-record dataset.

- :class:`FakeFeeds`: a gRPC server on a free loopback port with ``EdgePeerService.StreamEnvelopes`` (the
  envelopes the suite injects, one per message, ``received_at`` = injection time) and
  ``HealthService.WatchHealth`` (Healthy, then nothing). The subscription service under test is the real
  process; only what it follows is played, so its CPU is the figure's.
- :func:`consume`: the consumers, run in a ``spawn`` child so their decoding does not delay the injection
  clock: ``count`` StreamEvents calls, a channel each, every event's arrival time against its
  ``emitted_at`` (taken when its commit starts) and its record's ``received_at`` (injection).
- :class:`RecordDataset`: deterministic records — content topics by Zipf(1.2) popularity over 1,000 topics
  (:class:`bench.support.TopicModel`), ten subscriptions each receiving a tenth of the topics, one record in
  ten sent by us (a request id), 256-byte payloads, created evenly over one day — written with the store's
  own writer in commits of 2,000 records (seeding, not the service path).
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing.queues
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc.aio

from bench.support import TopicModel
from mailmesh.common.v1 import common_pb2
from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmesh.health.v1 import health_pb2, health_pb2_grpc
from mailmesh.subscription.v1 import subscription_pb2, subscription_pb2_grpc
from msgstore.types import Message, MessageOrigin, Record
from wakucodec.contenttopic import v1_topic_to_content_topic
from wakucodec.envelope import make_envelope

__all__ = ["END", "MEASURED", "WARM", "FakeFeeds", "RecordDataset", "consume", "content_topic"]

BENCH_TOPIC = b"\xbe\xef\x00\x01"


def content_topic(topic: bytes = BENCH_TOPIC) -> str:
    """The content topic a subscription gives for a 4-byte Waku v1 topic (nwaku's bridge mapping)."""
    return v1_topic_to_content_topic(topic)


class _Edge(edgepeer_pb2_grpc.EdgePeerServiceServicer):
    def __init__(self, queue: asyncio.Queue[edgepeer_pb2.ReceivedEnvelope]) -> None:
        self._queue = queue
        self.opened: list[tuple[bytes, ...]] = []

    async def StreamEnvelopes(  # noqa: N802 - gRPC method name
        self, request: edgepeer_pb2.StreamEnvelopesRequest, context: Any
    ) -> AsyncIterator[edgepeer_pb2.StreamEnvelopesResponse]:
        self.opened.append(tuple(request.topics))
        yield edgepeer_pb2.StreamEnvelopesResponse(epoch="bench-edge", resumed=False)
        while True:
            item = await self._queue.get()
            yield edgepeer_pb2.StreamEnvelopesResponse(epoch="bench-edge", envelopes=[item])


class _Health(health_pb2_grpc.HealthServiceServicer):
    async def WatchHealth(  # noqa: N802 - gRPC method name
        self, request: health_pb2.WatchHealthRequest, context: Any
    ) -> AsyncIterator[health_pb2.WatchHealthResponse]:
        report = health_pb2.HealthReport(status=common_pb2.HEALTH_STATUS_HEALTHY)
        yield health_pb2.WatchHealthResponse(report=report)
        await asyncio.Event().wait()


@dataclass
class FakeFeeds:
    """The edge peer's live feed and the health watch, served from this process."""

    address: str = ""
    _queue: asyncio.Queue[edgepeer_pb2.ReceivedEnvelope] = field(default_factory=asyncio.Queue)
    _server: grpc.aio.Server | None = None
    _edge: _Edge | None = None
    _sequence: int = 0

    async def start(self) -> None:
        """Serve on a free loopback port."""
        self._server = grpc.aio.server()
        self._edge = _Edge(self._queue)  # type: ignore[abstract]  # only StreamEnvelopes is called
        edgepeer_pb2_grpc.add_EdgePeerServiceServicer_to_server(self._edge, self._server)
        health = _Health()  # type: ignore[abstract]  # only WatchHealth is called
        health_pb2_grpc.add_HealthServiceServicer_to_server(health, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        self.address = f"127.0.0.1:{port}"

    async def stop(self) -> None:
        """Stop serving (open streams are cancelled)."""
        if self._server is not None:
            await self._server.stop(None)

    def streams_with(self, topic: bytes) -> int:
        """StreamEnvelopes calls opened whose filter holds ``topic``."""
        return sum(1 for topics in (self._edge.opened if self._edge else []) if topic in topics)

    def inject(self, data: bytes, topic: bytes = BENCH_TOPIC) -> None:
        """One accepted envelope on ``topic``, sent to the stream now (received_at = now)."""
        self._sequence += 1
        now = time.time()
        env = make_envelope(expiry=int(now) + 60, ttl=60, topic=topic, data=data, nonce=self._sequence)
        item = edgepeer_pb2.ReceivedEnvelope(
            envelope=common_pb2.Envelope(
                rlp=env.raw,
                hash=env.hash,
                expiry=env.expiry,
                ttl=env.ttl,
                topic=topic,
                data=data,
                nonce=env.nonce,
                sent=env.expiry - env.ttl,
            ),
            sequence=self._sequence,
        )
        item.received_at.FromNanoseconds(time.time_ns())
        self._queue.put_nowait(item)


#: Payload tags: warm-up envelopes, measured ones, and the one that ends the run.
WARM, MEASURED, END = b"W", b"M", b"E"


def consume(address: str, count: int, out: multiprocessing.queues.Queue[Any]) -> None:
    """Child process: ``count`` live StreamEvents consumers, each until the END envelope's message:change.

    Puts ("ready", n) once every consumer has read an event, then ("done", samples): for every consumer and
    event, (payload tag, sequence, arrival time, emitted_at, received_at) — UNIX seconds.
    """
    asyncio.run(_consume(address, count, out))


async def _consume(address: str, count: int, out: multiprocessing.queues.Queue[Any]) -> None:
    first = asyncio.Semaphore(0)
    samples: list[tuple[int, int, float, float, float]] = []

    async def one() -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = subscription_pb2_grpc.SubscriptionServiceStub(channel)
            call = stub.StreamEvents(subscription_pb2.StreamEventsRequest())
            started = False
            while True:
                reply: subscription_pb2.StreamEventsResponse = await call.read()  # type: ignore[assignment]
                arrived = time.time()
                if not started:
                    started = True
                    first.release()
                record = reply.event.record
                emitted = reply.event.emitted_at.ToNanoseconds() / 1e9
                injected = record.received_at.ToNanoseconds() / 1e9
                tag = record.message.payload[0]
                samples.append((tag, reply.event.sequence, arrived, emitted, injected))
                if tag == END[0] and reply.event.name == "message:change":
                    break
            call.cancel()

    tasks = [asyncio.create_task(one()) for _ in range(count)]
    for _ in range(count):
        await first.acquire()
    out.put(("ready", count))
    await asyncio.gather(*tasks)
    out.put(("done", samples))


@dataclass(frozen=True)
class RecordDataset:
    """``rows`` message records over one day from ``start`` (see the module docstring)."""

    rows: int
    start: float = 1_700_000_000.0
    span_s: float = 86_400.0
    subscriptions: int = 10
    #: Changes whenever the generated content changes; part of the cache key.
    version: int = 1
    topics: TopicModel = field(default_factory=TopicModel)

    @property
    def key(self) -> str:
        """Cache key: version and size."""
        return f"v{self.version}-{self.rows}"

    def subscription_id(self, s: int) -> str:
        """The GUID of subscription ``s``."""
        return f"bebebebe-0000-4000-8000-{s:012d}"

    def request_id(self, i: int) -> str:
        """The request id of record ``i`` when it is one we sent."""
        return f"beef{i:04x}"[:8] + f"-0000-4000-8000-{i:012d}"

    def message_hash(self, i: int) -> bytes:
        """Record ``i``'s key."""
        return hashlib.sha256(b"bench-record-%d" % i).digest()

    def content_topic(self, k: int) -> str:
        """The content topic of topic ``k`` (0 = the most popular)."""
        return content_topic(self.topics.topics[k])

    def batches(self, size: int) -> Iterator[list[Record]]:
        """The records in creation order, ``size`` at a time (deterministic)."""
        import random

        rng = random.Random(self.version * 7919 + self.rows)
        index = {t: k for k, t in enumerate(self.topics.topics)}
        pad = rng.randbytes(1 << 16)
        batch: list[Record] = []
        for i in range(self.rows):
            k = index[self.topics.pick(rng)]
            created = self.start + i * self.span_s / self.rows
            offset = rng.randrange(len(pad) - 256)
            sent = i % 10 == 0
            batch.append(
                Record(
                    message_hash=self.message_hash(i),
                    pubsub_topic="/waku/2/rs/1/0",
                    message=Message(
                        pad[offset : offset + 256], self.content_topic(k), timestamp=int(created)
                    ),
                    origin=MessageOrigin.SEND if sent else MessageOrigin.SUBSCRIPTION,
                    created_at=created,
                    request_id=self.request_id(i) if sent else "",
                    sent=sent,
                    received=not sent,
                    envelope_hash=hashlib.sha256(b"bench-envelope-%d" % i).digest(),
                    subscription_ids=() if sent else (self.subscription_id(k % self.subscriptions),),
                    updated_at=created,
                    received_at=None if sent else created,
                )
            )
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch
