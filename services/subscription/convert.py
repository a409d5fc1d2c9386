"""Domain values (``msgstore.types``, :mod:`.rules`) to and from their ``mailmesh.*.v1`` messages.

The store's enums carry the protos' numbers (``msgstore.types``), so enums convert by value. Instants are
UNIX seconds as floats in the domain and ``google.protobuf.Timestamp`` on the wire.
"""

from __future__ import annotations

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2
from mailmesh.subscription.v1 import subscription_pb2
from meshcore.protoconv import seconds, timestamp
from msgproto.common import (
    error_from_proto,
    error_to_proto,
    message_from_proto,
    message_to_proto,
    progress_from_proto,
    progress_to_proto,
)
from msgstore.types import (
    Event,
    EventType,
    HealthStatus,
    Record,
    Subscription,
)
from services.subscription.rules import SendUpdate

__all__ = [
    "WAKU_API_NAMES",
    "event_to_proto",
    "record_to_proto",
    "send_update_from_proto",
    "subscription_to_proto",
]

#: The newer WAKU-API names of the events that have one (waku-api.md "Events"), one to one with the
#: MESSAGING-API names; ConnectionStatus shares HealthStatus's numbers (common.proto).
WAKU_API_NAMES = {
    EventType.MESSAGE_SENT: "message:send-propagated",
    EventType.MESSAGE_ERROR: "message:send-error",
    EventType.HEALTH_CHANGE: "health:connection-status",
}


def record_to_proto(record: Record) -> common_pb2.MessageRecord:
    """The MessageRecord a client sees."""
    out = common_pb2.MessageRecord(
        request_id=record.request_id,
        message_hash=record.message_hash,
        pubsub_topic=record.pubsub_topic,
        message=message_to_proto(record.message),
        sending=record.sending,
        sent=record.sent,
        stored=record.stored,
        received=record.received,
        origin=int(record.origin),  # type: ignore[arg-type]
        envelope_hash=record.envelope_hash,
        subscription_ids=record.subscription_ids,
        revision=record.revision,
    )
    if record.error is not None:
        out.error.CopyFrom(error_to_proto(record.error))
    if record.send_progress is not None:
        out.send_progress.CopyFrom(progress_to_proto(record.send_progress))
    out.created_at.CopyFrom(timestamp(record.created_at))
    if record.updated_at:
        out.updated_at.CopyFrom(timestamp(record.updated_at))
    for name in ("sent_at", "stored_at", "received_at"):
        value = getattr(record, name)
        if value is not None:
            getattr(out, name).CopyFrom(timestamp(value))
    return out


def subscription_to_proto(subscription: Subscription) -> subscription_pb2.Subscription:
    """A Subscription as ListSubscriptions returns it."""
    out = subscription_pb2.Subscription(
        subscription_id=subscription.subscription_id,
        pubsub_topic=subscription.pubsub_topic,
        content_topics=subscription.content_topics,
        envelope_topics=subscription.envelope_topics,
        background=subscription.background,
        store_confirmation=subscription.store_confirmation,
        received_count=subscription.received_count,
    )
    out.created_at.CopyFrom(timestamp(subscription.created_at))
    return out


def event_to_proto(event: Event) -> subscription_pb2.Event:
    """An event with both its MESSAGING-API and (where it has one) its WAKU-API name."""
    out = subscription_pb2.Event(
        sequence=event.sequence,
        type=int(event.type),  # type: ignore[arg-type]
        name=event.type.spec_name,
        waku_api_name=WAKU_API_NAMES.get(event.type, ""),
    )
    out.emitted_at.CopyFrom(timestamp(event.emitted_at))
    if event.record is not None:
        out.record.CopyFrom(record_to_proto(event.record))
    elif event.health is not None:
        status, previous = int(event.health.status), int(event.health.previous)
        out.health.CopyFrom(
            subscription_pb2.HealthChange(
                status=status,  # type: ignore[arg-type]
                previous=previous,  # type: ignore[arg-type]
                connection_status=status,  # type: ignore[arg-type]
                previous_connection_status=previous,  # type: ignore[arg-type]
            )
        )
    return out


def send_update_from_proto(status: send_pb2.SendStatus) -> SendUpdate:
    """A WatchSendStatuses change as the record rules take it."""
    return SendUpdate(
        request_id=status.request_id,
        message_hash=status.message_hash,
        pubsub_topic=status.pubsub_topic,
        message=message_from_proto(status.message),
        sending=status.sending,
        sent=status.sent,
        stored=status.stored,
        error=error_from_proto(status.error) if status.HasField("error") else None,
        progress=progress_from_proto(status.progress) if status.HasField("progress") else None,
        envelope_hash=status.envelope_hash,
        updated_at=seconds(status.updated_at) if status.HasField("updated_at") else 0.0,
    )


def health_status(value: int) -> HealthStatus:
    """A HealthStatus number from the health service (unknown numbers read as UNSPECIFIED)."""
    try:
        return HealthStatus(value)
    except ValueError:
        return HealthStatus.UNSPECIFIED
