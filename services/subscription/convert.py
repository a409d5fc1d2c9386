"""Domain values (``msgstore.types``, :mod:`.rules`) to and from their ``mailmesh.*.v1`` messages.

The store's enums carry the protos' numbers (``msgstore.types``), so enums convert by value. Instants are
UNIX seconds as floats in the domain and ``google.protobuf.Timestamp`` on the wire.
"""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2
from mailmesh.subscription.v1 import subscription_pb2
from msgstore.types import (
    Event,
    EventType,
    HealthStatus,
    Message,
    MessageError,
    MessageErrorKind,
    Record,
    SendPriority,
    SendProgress,
    SendState,
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


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(round(seconds * 1e9))
    return stamp


def _seconds(stamp: Timestamp) -> float:
    return stamp.ToNanoseconds() / 1e9


def message_to_proto(message: Message) -> common_pb2.WakuMessage:
    """The 14/WAKU2 message; absent optional fields stay absent."""
    out = common_pb2.WakuMessage(payload=message.payload, content_topic=message.content_topic)
    if message.version is not None:
        out.version = message.version
    if message.timestamp is not None:
        out.timestamp = message.timestamp
    if message.meta is not None:
        out.meta = message.meta
    if message.rate_limit_proof is not None:
        out.rate_limit_proof = message.rate_limit_proof
    if message.ephemeral is not None:
        out.ephemeral = message.ephemeral
    return out


def message_from_proto(message: common_pb2.WakuMessage) -> Message:
    """The domain message; unset optional fields are None."""
    return Message(
        payload=message.payload,
        content_topic=message.content_topic,
        version=message.version if message.HasField("version") else None,
        timestamp=message.timestamp if message.HasField("timestamp") else None,
        meta=message.meta if message.HasField("meta") else None,
        rate_limit_proof=message.rate_limit_proof if message.HasField("rate_limit_proof") else None,
        ephemeral=message.ephemeral if message.HasField("ephemeral") else None,
    )


def _error_to_proto(error: MessageError) -> common_pb2.MessageError:
    out = common_pb2.MessageError(
        kind=int(error.kind),  # type: ignore[arg-type]
        detail=error.detail,
        envelope_fault=error.envelope_fault,  # type: ignore[arg-type]
        attempt=error.attempt,
    )
    if error.occurred_at:
        out.occurred_at.CopyFrom(_timestamp(error.occurred_at))
    return out


def _error_from_proto(error: common_pb2.MessageError) -> MessageError:
    return MessageError(
        kind=MessageErrorKind(error.kind),
        detail=error.detail,
        envelope_fault=int(error.envelope_fault),
        attempt=error.attempt,
        occurred_at=_seconds(error.occurred_at) if error.HasField("occurred_at") else 0.0,
    )


def _progress_to_proto(progress: SendProgress) -> common_pb2.SendProgress:
    out = common_pb2.SendProgress(
        state=int(progress.state),  # type: ignore[arg-type]
        priority=int(progress.priority),  # type: ignore[arg-type]
        attempts=progress.attempts,
        max_attempts=progress.max_attempts,
        relayed_peers=progress.relayed_peers,
        store_confirmation=progress.store_confirmation,
    )
    out.scheduled_at.CopyFrom(_timestamp(progress.scheduled_at))
    for name in ("last_attempt_at", "next_attempt_at", "finished_at"):
        value = getattr(progress, name)
        if value is not None:
            getattr(out, name).CopyFrom(_timestamp(value))
    return out


def _progress_from_proto(progress: common_pb2.SendProgress) -> SendProgress:
    def optional(name: str) -> float | None:
        return _seconds(getattr(progress, name)) if progress.HasField(name) else None  # type: ignore[arg-type]

    return SendProgress(
        state=SendState(progress.state),
        priority=SendPriority(progress.priority),
        attempts=progress.attempts,
        max_attempts=progress.max_attempts,
        relayed_peers=progress.relayed_peers,
        store_confirmation=progress.store_confirmation,
        scheduled_at=_seconds(progress.scheduled_at),
        last_attempt_at=optional("last_attempt_at"),
        next_attempt_at=optional("next_attempt_at"),
        finished_at=optional("finished_at"),
    )


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
        out.error.CopyFrom(_error_to_proto(record.error))
    if record.send_progress is not None:
        out.send_progress.CopyFrom(_progress_to_proto(record.send_progress))
    out.created_at.CopyFrom(_timestamp(record.created_at))
    if record.updated_at:
        out.updated_at.CopyFrom(_timestamp(record.updated_at))
    for name in ("sent_at", "stored_at", "received_at"):
        value = getattr(record, name)
        if value is not None:
            getattr(out, name).CopyFrom(_timestamp(value))
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
    out.created_at.CopyFrom(_timestamp(subscription.created_at))
    return out


def event_to_proto(event: Event) -> subscription_pb2.Event:
    """An event with both its MESSAGING-API and (where it has one) its WAKU-API name."""
    out = subscription_pb2.Event(
        sequence=event.sequence,
        type=int(event.type),  # type: ignore[arg-type]
        name=event.type.spec_name,
        waku_api_name=WAKU_API_NAMES.get(event.type, ""),
    )
    out.emitted_at.CopyFrom(_timestamp(event.emitted_at))
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
        error=_error_from_proto(status.error) if status.HasField("error") else None,
        progress=_progress_from_proto(status.progress) if status.HasField("progress") else None,
        envelope_hash=status.envelope_hash,
        updated_at=_seconds(status.updated_at) if status.HasField("updated_at") else 0.0,
    )


def health_status(value: int) -> HealthStatus:
    """A HealthStatus number from the health service (unknown numbers read as UNSPECIFIED)."""
    try:
        return HealthStatus(value)
    except ValueError:
        return HealthStatus.UNSPECIFIED
