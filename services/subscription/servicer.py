"""SubscriptionService: proto ⇄ domain translation of Subscribe, Message Storage and the event source.

Writes (Subscribe, Unsubscribe) go through the writer replica's :class:`~.recorder.Recorder`; a replica
that is not the writer answers UNAVAILABLE (another replica writes; clients retry). Reads are served by
every replica from the shared store, and live events from the replica's own :class:`~.hub.EventHub`.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

import grpc

from mailmesh.subscription.v1 import subscription_pb2, subscription_pb2_grpc
from meshcore import InvalidArgument, NotFound, ResourceExhausted, Unavailable
from msgapi.config import RESERVED_SUBSCRIPTION_ID, parse_content_topic
from msgapi.errors import MessagingError
from msgstore.protocol import RecordStore
from msgstore.types import Event, Gap, Record, Subscription
from services.subscription.app import SubscriptionApp
from services.subscription.convert import event_to_proto, record_to_proto, subscription_to_proto
from services.subscription.events import EventReader, RecordQuery, event_filter, list_records
from services.subscription.hub import Consumer
from wakucodec.contenttopic import content_topic_to_v1_topic

__all__ = ["SERVICE_NAME", "SubscriptionServicer"]

SERVICE_NAME = "mailmesh.subscription.v1.SubscriptionService"
_MAX_CONTENT_TOPICS = 100  # subscription.proto SubscribeRequest: 1 to 100
_CHUNK = 100  # ListMessageRecordsResponse: at most 100 records each
_MAX_WAIT_S = 60.0
#: Recent events kept as protos: every live consumer of an event streams the same message, converted once
#: (with 100 consumers the conversion was most of the service's CPU per delivered event; docs/benchmarks.md).
_CONVERTED = 4096


def _limit(value: int) -> int:
    return 100 if value == 0 else min(value, 1000)


def _wait(request: Any) -> float:
    return min(request.wait.ToNanoseconds() / 1e9, _MAX_WAIT_S) if request.HasField("wait") else 0.0


class SubscriptionServicer(subscription_pb2_grpc.SubscriptionServiceServicer):
    """The gRPC face of the recorder, the store's reads and the event hub."""

    def __init__(self, app: SubscriptionApp) -> None:
        self._app = app
        self._recorder = app.recorder
        self._messaging = app.messaging
        self._events = EventReader(app.recorder)
        self._converted: OrderedDict[int, subscription_pb2.StreamEventsResponse] = OrderedDict()

    @property
    def _records(self) -> RecordStore:
        # Read per call: a store's parts exist only once it is open (the start hook opens it).
        return self._app.store.records

    def _response(self, event: Event) -> subscription_pb2.StreamEventsResponse:
        """``event`` as a StreamEventsResponse, converted once for all the consumers that stream it (the
        messages are only read after this: gRPC serializes them per call)."""
        response = self._converted.get(event.sequence)
        if response is None:
            response = subscription_pb2.StreamEventsResponse(event=event_to_proto(event))
            self._converted[event.sequence] = response
            if len(self._converted) > _CONVERTED:
                self._converted.popitem(last=False)
        return response

    def _ready(self) -> None:
        if not self._app.started:
            raise Unavailable("the subscription service is starting (its store is not open yet)")

    # ------------------------------------------------------------------------------------------ subscriptions

    async def Subscribe(  # noqa: N802 - gRPC method name
        self, request: subscription_pb2.SubscribeRequest, context: Any
    ) -> subscription_pb2.SubscribeResponse:
        """A new subscription (a new GUID on every call)."""
        self._ready()
        try:
            pubsub_topic = self._messaging.topics.for_subscribe(request.pubsub_topic)
        except MessagingError as err:
            raise NotFound(str(err), {"pubsub_topic": request.pubsub_topic}) from err
        if not 1 <= len(request.content_topics) <= _MAX_CONTENT_TOPICS:
            raise InvalidArgument(f"content_topics: give 1 to {_MAX_CONTENT_TOPICS} content topics")
        topics: list[str] = []
        for raw in request.content_topics:
            try:
                topic = parse_content_topic(raw)
            except ValueError as err:
                raise InvalidArgument(f"content_topics: {err}", {"field": "content_topics"}) from err
            if topic not in topics:
                topics.append(topic)
        subscription = Subscription(
            subscription_id=str(uuid.uuid4()),
            pubsub_topic=pubsub_topic,
            content_topics=tuple(topics),
            envelope_topics=tuple(content_topic_to_v1_topic(t) for t in topics),
            created_at=self._recorder.now(),
            store_confirmation=self._messaging.store_confirmation,
        )
        await self._recorder.save_subscription(subscription)
        return subscription_pb2.SubscribeResponse(subscription_id=subscription.subscription_id)

    async def Unsubscribe(  # noqa: N802 - gRPC method name
        self, request: subscription_pb2.UnsubscribeRequest, context: Any
    ) -> subscription_pb2.UnsubscribeResponse:
        """Ends an active subscription; unknown, inactive and reserved ids are ignored (removed = false)."""
        self._ready()
        if request.subscription_id == RESERVED_SUBSCRIPTION_ID:
            return subscription_pb2.UnsubscribeResponse(removed=False)
        removed = await self._recorder.end_subscription(request.subscription_id)
        return subscription_pb2.UnsubscribeResponse(removed=removed)

    async def ListSubscriptions(  # noqa: N802 - gRPC method name
        self, request: subscription_pb2.ListSubscriptionsRequest, context: Any
    ) -> subscription_pb2.ListSubscriptionsResponse:
        """Every active subscription by creation, the reserved background one included when active."""
        self._ready()
        active = await self._records.list_subscriptions(active_only=True)
        return subscription_pb2.ListSubscriptionsResponse(
            subscriptions=[subscription_to_proto(s) for s in active]
        )

    # ------------------------------------------------------------------------------------------ records

    async def GetMessageRecord(  # noqa: N802 - gRPC method name
        self, request: subscription_pb2.GetMessageRecordRequest, context: Any
    ) -> subscription_pb2.GetMessageRecordResponse:
        """One record by request id or message hash; NOT_FOUND with the spec's REST texts."""
        self._ready()
        record: Record | None
        key = request.WhichOneof("key")
        if key == "request_id":
            record = await self._records.get_by_request(request.request_id) if request.request_id else None
            if record is None:
                raise NotFound(f"Message with requestId '{request.request_id}' not found")
        elif key == "message_hash":
            # MESSAGING-API getByHash: an invalid hash "MUST return nothing", like an unknown one.
            valid = len(request.message_hash) == 32
            record = await self._records.get(request.message_hash) if valid else None
            if record is None:
                raise NotFound(f"Message with hash '0x{request.message_hash.hex()}' not found")
        else:
            raise InvalidArgument("give request_id or message_hash", {"field": "key"})
        return subscription_pb2.GetMessageRecordResponse(record=record_to_proto(record))

    async def ListMessageRecords(  # noqa: N802 - gRPC method name
        self, request: subscription_pb2.ListMessageRecordsRequest, context: Any
    ) -> AsyncIterator[subscription_pb2.ListMessageRecordsResponse]:
        """The matching records in (created_at, hash) order with MESSAGING-API skip/take, in chunks."""
        self._ready()
        query = RecordQuery.of(request.filter)
        skip = request.skip if request.HasField("skip") else None
        take = request.take if request.HasField("take") else None
        records = await list_records(self._records, query, skip, take)
        for start in range(0, len(records), _CHUNK):
            chunk = records[start : start + _CHUNK]
            yield subscription_pb2.ListMessageRecordsResponse(records=[record_to_proto(r) for r in chunk])

    async def PollRecords(  # noqa: N802 - gRPC method name
        self, request: subscription_pb2.PollRecordsRequest, context: Any
    ) -> subscription_pb2.PollRecordsResponse:
        """Records changed after a revision (waiting up to ``wait`` for one)."""
        self._ready()
        after = request.after_revision if request.HasField("after_revision") else None
        records, last = await self._events.poll_records(
            RecordQuery.of(request.filter), after, _limit(request.limit), _wait(request)
        )
        return subscription_pb2.PollRecordsResponse(
            records=[record_to_proto(r) for r in records], last_revision=last
        )

    # ------------------------------------------------------------------------------------------ events

    async def StreamEvents(  # noqa: N802 - gRPC method name
        self, request: subscription_pb2.StreamEventsRequest, context: Any
    ) -> AsyncIterator[subscription_pb2.StreamEventsResponse]:
        """Retained events after ``after_sequence`` (if given), then live ones."""
        self._ready()
        flt = event_filter(request.filter)
        consumer: Consumer = self._recorder.hub.subscribe(flt)
        try:
            last = self._recorder.hub.last_sequence
            if request.HasField("after_sequence"):
                last = request.after_sequence
                async for event in self._events.replay(flt, last):
                    if isinstance(event, Gap):
                        await _expired(context, request.after_sequence, event)
                        return
                    last = event.sequence
                    if flt.matches(event):
                        yield self._response(event)
            while True:
                batch = await consumer.next_batch()
                if consumer.overflowed:
                    raise ResourceExhausted(
                        f"slow consumer: more than {consumer.capacity} events unread; resume after sequence "
                        f"{last}",
                        {"resume_after": last},
                    )
                if consumer.closed:
                    return
                for event in batch:
                    if event.sequence > last:
                        last = event.sequence
                        yield self._response(event)
        finally:
            self._recorder.hub.unsubscribe(consumer)

    async def PollEvents(  # noqa: N802 - gRPC method name
        self, request: subscription_pb2.PollEventsRequest, context: Any
    ) -> subscription_pb2.PollEventsResponse:
        """Matching events after ``after_sequence`` (or the head), waiting up to ``wait`` for the first."""
        self._ready()
        after = request.after_sequence if request.HasField("after_sequence") else None
        result = await self._events.poll(
            event_filter(request.filter), after, _limit(request.limit), _wait(request)
        )
        if isinstance(result, Gap):
            await _expired(context, after or 0, result)
            raise AssertionError("unreachable: abort raises")
        events, last = result
        return subscription_pb2.PollEventsResponse(
            events=[event_to_proto(e) for e in events], last_sequence=last
        )


async def _expired(context: Any, after: int, gap: Gap) -> None:
    """OUT_OF_RANGE (SEQUENCE_EXPIRED) with the oldest retained sequence in the "oldest" trailer."""
    await context.abort(
        grpc.StatusCode.OUT_OF_RANGE,
        f"sequence {after} is older than the retained events; the oldest retained is {gap.oldest}",
        trailing_metadata=(("oldest", str(gap.oldest)),),
    )
