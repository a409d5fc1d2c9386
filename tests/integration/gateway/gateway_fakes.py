"""In-process stand-ins for the send, subscription and health services, served over real gRPC on port 0.

They answer the way the real services document their RPCs (send.proto, subscription.proto, health.proto): the
spec's NOT_FOUND texts, INVALID_ARGUMENT for a bad content topic, OUT_OF_RANGE with the ``oldest`` trailer for
a resume point past retention, an event log with strictly increasing sequences. Each records what it was
asked, so a test can check what the gateway sent upstream. ``fail`` makes the next calls of a method fail
with a status, to drive the gateway's error mapping.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from mailmesh.common.v1 import common_pb2
from mailmesh.health.v1 import health_pb2, health_pb2_grpc
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from mailmesh.subscription.v1 import subscription_pb2 as pb
from mailmesh.subscription.v1 import subscription_pb2_grpc
from meshcore.auth import bearer_token

SERVED_PUBSUB = ("", "/waku/2/rs/1/0", "/waku/2/rs/1/1")
_TYPE_NAMES = {
    pb.EVENT_TYPE_HEALTH_CHANGE: "health:change",
    pb.EVENT_TYPE_MESSAGE_CHANGE: "message:change",
    pb.EVENT_TYPE_MESSAGE_SENT: "message:sent",
    pb.EVENT_TYPE_MESSAGE_ERROR: "message:error",
    pb.EVENT_TYPE_MESSAGE_RECEIVED: "message:received",
    pb.EVENT_TYPE_MESSAGE_STORED: "message:stored",
}


@dataclass
class Failures:
    """Statuses to fail the next calls of a method with: method name → [(code, details, trailers)]."""

    pending: dict[str, list[tuple[grpc.StatusCode, str, tuple[tuple[str, str], ...]]]] = field(
        default_factory=dict
    )
    tokens: list[str | None] = field(default_factory=list)
    """The bearer token of every call, in order (None: the call carried none)."""
    traceparents: list[str | None] = field(default_factory=list)
    """The W3C ``traceparent`` of every call, in order (None: the call carried none)."""

    def fail(self, method: str, code: grpc.StatusCode, details: str = "", **trailers: str) -> None:
        self.pending.setdefault(method, []).append((code, details, tuple(trailers.items())))

    async def check(self, method: str, context: Any) -> None:
        self.tokens.append(bearer_token(context.invocation_metadata()))
        self.traceparents.append(dict(context.invocation_metadata() or ()).get("traceparent"))
        queue = self.pending.get(method)
        if queue:
            code, details, trailers = queue.pop(0)
            await context.abort(code, details, trailing_metadata=trailers)


class FakeSend(send_pb2_grpc.SendServiceServicer):
    """SendService: Send validates the pubsub topic and the content topic's shape; Cancel and
    ListPendingRequests over what was sent."""

    def __init__(self, failures: Failures) -> None:
        self.failures = failures
        self.requests: list[send_pb2.SendRequest] = []
        self.pending_ids: list[str] = []
        self.canceled: list[str] = []

    async def Send(self, request: send_pb2.SendRequest, context: Any) -> send_pb2.SendResponse:
        await self.failures.check("Send", context)
        if request.pubsub_topic not in SERVED_PUBSUB:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"Failed to send message. Target pubsubTopic '{request.pubsub_topic}' not supported.",
            )
        if request.message.content_topic.count("/") < 4:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid content topic: too few parts")
        self.requests.append(request)
        rid = str(uuid.uuid4())
        self.pending_ids.append(rid)
        return send_pb2.SendResponse(request_id=rid, message_hash=bytes(32), created=True)

    async def Cancel(self, request: send_pb2.CancelRequest, context: Any) -> send_pb2.CancelResponse:
        await self.failures.check("Cancel", context)
        self.canceled.append(request.request_id)
        known = request.request_id in self.pending_ids
        if known:
            self.pending_ids.remove(request.request_id)
        return send_pb2.CancelResponse(canceled=known)

    async def ListPendingRequests(self, request: Any, context: Any) -> send_pb2.ListPendingRequestsResponse:
        await self.failures.check("ListPendingRequests", context)
        return send_pb2.ListPendingRequestsResponse(request_ids=self.pending_ids)


def make_record(
    payload: bytes,
    content_topic: str,
    *,
    request_id: str = "",
    subscription_ids: tuple[str, ...] = (),
    seed: int = 1,
    sending: bool = False,
    sent: bool = False,
    stored: bool = False,
    received: bool = False,
) -> common_pb2.MessageRecord:
    """A record as the subscription service returns it."""
    message = common_pb2.WakuMessage(payload=payload, content_topic=content_topic)
    record = common_pb2.MessageRecord(
        request_id=request_id,
        message_hash=bytes([seed]) * 32,
        pubsub_topic="/waku/2/rs/1/0",
        message=message,
        subscription_ids=subscription_ids,
        sending=sending,
        sent=sent,
        stored=stored,
        received=received,
    )
    return record


class FakeSubscription(subscription_pb2_grpc.SubscriptionServiceServicer):
    """SubscriptionService over in-memory subscriptions, records and an event log."""

    def __init__(self, failures: Failures) -> None:
        self.failures = failures
        self.subscriptions: list[str] = []
        self.subscribe_requests: list[pb.SubscribeRequest] = []
        self.records: list[common_pb2.MessageRecord] = []
        self.events: list[pb.Event] = []
        self.oldest = 1  # the oldest retained sequence
        self.stream_calls: list[pb.StreamEventsRequest] = []
        self._changed = asyncio.Condition()
        self.revision = 0
        self.waiting = 0  # PollEvents / PollRecords calls waiting now
        self.streaming = 0  # StreamEvents calls open now
        self.poll_gate = asyncio.Event()  # PollEvents answers only while set (a test clears it to hold them)
        self.poll_gate.set()
        self.polls_held = 0  # PollEvents calls that arrived while the gate was closed

    # ------------------------------------------------------------------------------------ test controls

    async def add_record(self, record: common_pb2.MessageRecord) -> None:
        """Store (or replace by hash) a record; pollers wake."""
        async with self._changed:
            self.revision += 1
            record.revision = self.revision
            self.records = [r for r in self.records if r.message_hash != record.message_hash] + [record]
            self._changed.notify_all()

    async def emit(
        self, name: str, record: common_pb2.MessageRecord | None = None, health: int = 0
    ) -> pb.Event:
        """Append an event; streams and polls wake."""
        async with self._changed:
            seq = (self.events[-1].sequence if self.events else 0) + 1
            event = pb.Event(sequence=seq, name=name)
            event.type = next(t for t, n in _TYPE_NAMES.items() if n == name)
            event.emitted_at.GetCurrentTime()
            if record is not None:
                event.record.CopyFrom(record)
            else:
                event.health.status = health  # type: ignore[assignment]
                event.health.previous = common_pb2.HEALTH_STATUS_UNHEALTHY
                event.health.connection_status = health  # type: ignore[assignment]
            if name == "message:sent":
                event.waku_api_name = "message:send-propagated"
            self.events.append(event)
            self._changed.notify_all()
            return event

    def expire_before(self, oldest: int) -> None:
        """Retention: drop events below ``oldest``."""
        self.oldest = oldest
        self.events = [e for e in self.events if e.sequence >= oldest]

    @property
    def head(self) -> int:
        return self.events[-1].sequence if self.events else self.oldest - 1

    # ------------------------------------------------------------------------------------ subscriptions

    async def Subscribe(self, request: pb.SubscribeRequest, context: Any) -> pb.SubscribeResponse:
        await self.failures.check("Subscribe", context)
        if request.pubsub_topic.startswith("/waku/2/rs/") and not request.pubsub_topic.startswith(
            "/waku/2/rs/1/"
        ):
            cluster = request.pubsub_topic.split("/")[4]
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"Cannot create subscription. clusterId {cluster} is not supported.",
            )
        self.subscribe_requests.append(request)
        sid = str(uuid.uuid4())
        self.subscriptions.append(sid)
        return pb.SubscribeResponse(subscription_id=sid)

    async def Unsubscribe(self, request: pb.UnsubscribeRequest, context: Any) -> pb.UnsubscribeResponse:
        await self.failures.check("Unsubscribe", context)
        removed = request.subscription_id in self.subscriptions
        if removed:
            self.subscriptions.remove(request.subscription_id)
        return pb.UnsubscribeResponse(removed=removed)

    async def ListSubscriptions(self, request: Any, context: Any) -> pb.ListSubscriptionsResponse:
        await self.failures.check("ListSubscriptions", context)
        return pb.ListSubscriptionsResponse(
            subscriptions=[pb.Subscription(subscription_id=s) for s in self.subscriptions]
        )

    # ------------------------------------------------------------------------------------ records

    def _matches(self, flt: pb.RecordFilter, record: common_pb2.MessageRecord) -> bool:
        return (not flt.content_topic or record.message.content_topic == flt.content_topic) and (
            not flt.subscription_id or flt.subscription_id in record.subscription_ids
        )

    async def GetMessageRecord(
        self, request: pb.GetMessageRecordRequest, context: Any
    ) -> pb.GetMessageRecordResponse:
        await self.failures.check("GetMessageRecord", context)
        if request.WhichOneof("key") == "request_id":
            found = [r for r in self.records if r.request_id and r.request_id == request.request_id]
            text = f"Message with requestId '{request.request_id}' not found"
        else:
            found = [r for r in self.records if r.message_hash == request.message_hash]
            text = f"Message with hash '0x{request.message_hash.hex()}' not found"
        if not found:
            await context.abort(grpc.StatusCode.NOT_FOUND, text)
        return pb.GetMessageRecordResponse(record=found[0])

    async def ListMessageRecords(
        self, request: pb.ListMessageRecordsRequest, context: Any
    ) -> AsyncIterator[pb.ListMessageRecordsResponse]:
        await self.failures.check("ListMessageRecords", context)
        found = [r for r in self.records if self._matches(request.filter, r)]
        skip = request.skip if request.HasField("skip") else 0
        found = found[skip:]
        if request.HasField("take"):
            found = found[: request.take]
        for i in range(0, len(found), 100):
            yield pb.ListMessageRecordsResponse(records=found[i : i + 100])

    async def PollRecords(self, request: pb.PollRecordsRequest, context: Any) -> pb.PollRecordsResponse:
        await self.failures.check("PollRecords", context)
        after = request.after_revision if request.HasField("after_revision") else self.revision
        wait = request.wait.ToNanoseconds() / 1e9

        def newer() -> list[common_pb2.MessageRecord]:
            return [r for r in self.records if r.revision > after and self._matches(request.filter, r)]

        async with self._changed:
            self.waiting += 1
            try:
                async with asyncio.timeout(wait):
                    await self._changed.wait_for(lambda: bool(newer()))
            except TimeoutError:
                pass
            finally:
                self.waiting -= 1
            found = newer()
        last = found[-1].revision if found else after
        return pb.PollRecordsResponse(records=found, last_revision=last)

    # ------------------------------------------------------------------------------------ events

    def _matching(self, flt: pb.EventFilter, after: int) -> list[pb.Event]:
        types = set(flt.types)
        return [
            e
            for e in self.events
            if e.sequence > after
            and (not types or e.type in types)
            and (not flt.request_id or e.HasField("health") or e.record.request_id == flt.request_id)
            and (
                not flt.subscription_id
                or e.HasField("health")
                or flt.subscription_id in e.record.subscription_ids
            )
        ]

    async def _expired(self, after: int, context: Any) -> None:
        if after and after < self.oldest - 1:
            await context.abort(
                grpc.StatusCode.OUT_OF_RANGE,
                f"sequence {after} is older than the retained events; the oldest retained is {self.oldest}",
                trailing_metadata=(("oldest", str(self.oldest)),),
            )

    async def PollEvents(self, request: pb.PollEventsRequest, context: Any) -> pb.PollEventsResponse:
        await self.failures.check("PollEvents", context)
        self.polls_held += not self.poll_gate.is_set()
        await self.poll_gate.wait()
        after = request.after_sequence if request.HasField("after_sequence") else self.head
        await self._expired(after, context)
        wait = request.wait.ToNanoseconds() / 1e9
        limit = request.limit or 100
        async with self._changed:
            self.waiting += wait > 0
            try:
                async with asyncio.timeout(wait):
                    await self._changed.wait_for(lambda: bool(self._matching(request.filter, after)))
            except TimeoutError:
                pass
            finally:
                self.waiting -= wait > 0
            found = self._matching(request.filter, after)[:limit]
        last = found[-1].sequence if found else max(after, 0)
        return pb.PollEventsResponse(events=found, last_sequence=last)

    async def StreamEvents(
        self, request: pb.StreamEventsRequest, context: Any
    ) -> AsyncIterator[pb.StreamEventsResponse]:
        await self.failures.check("StreamEvents", context)
        self.stream_calls.append(request)
        start = request.after_sequence if request.HasField("after_sequence") else self.head
        await self._expired(start, context)
        after = [start]
        self.streaming += 1
        try:
            while True:
                async with self._changed:
                    await self._changed.wait_for(lambda: bool(self._matching(request.filter, after[0])))
                    found = self._matching(request.filter, after[0])
                for event in found:
                    after[0] = event.sequence
                    yield pb.StreamEventsResponse(event=event)
        finally:
            self.streaming -= 1


class FakeHealth(health_pb2_grpc.HealthServiceServicer):
    """HealthService: a settable status; WatchHealth sends the current report, then every change."""

    def __init__(self, failures: Failures) -> None:
        self.failures = failures
        self.status: int = common_pb2.HEALTH_STATUS_MINIMALLY_HEALTHY
        self._changed = asyncio.Condition()
        self.watchers = 0  # WatchHealth calls open now
        self.watch_calls = 0  # WatchHealth calls ever made

    def report(self) -> health_pb2.HealthReport:
        return health_pb2.HealthReport(status=self.status, connection_status=self.status)  # type: ignore[arg-type]

    async def set_status(self, status: int) -> None:
        async with self._changed:
            self.status = status
            self._changed.notify_all()

    async def GetHealth(self, request: Any, context: Any) -> health_pb2.GetHealthResponse:
        await self.failures.check("GetHealth", context)
        return health_pb2.GetHealthResponse(report=self.report())

    async def WatchHealth(self, request: Any, context: Any) -> AsyncIterator[health_pb2.WatchHealthResponse]:
        await self.failures.check("WatchHealth", context)
        self.watchers += 1
        self.watch_calls += 1
        try:
            seen = [self.status]
            yield health_pb2.WatchHealthResponse(report=self.report())
            while True:
                async with self._changed:
                    await self._changed.wait_for(lambda: self.status != seen[0])
                previous, seen[0] = seen[0], self.status
                reply = health_pb2.WatchHealthResponse(report=self.report(), status_changed=True)
                reply.previous_status = previous  # type: ignore[assignment]
                yield reply
        finally:
            self.watchers -= 1


@dataclass
class Fakes:
    """The three fakes on one gRPC server."""

    server: grpc.aio.Server
    address: str
    failures: Failures
    send: FakeSend
    subscription: FakeSubscription
    health: FakeHealth


async def start_fakes() -> Fakes:
    """Serve the fakes on 127.0.0.1, port 0."""
    failures = Failures()
    send = FakeSend(failures)  # type: ignore[abstract]  # only the RPCs the gateway calls
    subscription, health = FakeSubscription(failures), FakeHealth(failures)
    server = grpc.aio.server()
    send_pb2_grpc.add_SendServiceServicer_to_server(send, server)
    subscription_pb2_grpc.add_SubscriptionServiceServicer_to_server(subscription, server)
    health_pb2_grpc.add_HealthServiceServicer_to_server(health, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return Fakes(server, f"127.0.0.1:{port}", failures, send, subscription, health)
