"""WakuMessage, MessageError and SendProgress (common.proto) ⇄ their ``msgstore.types`` values."""

from __future__ import annotations

from mailmesh.common.v1 import common_pb2
from meshcore.protoconv import seconds, timestamp
from msgstore.types import Message, MessageError, MessageErrorKind, SendPriority, SendProgress, SendState

__all__ = [
    "error_from_proto",
    "error_to_proto",
    "message_from_proto",
    "message_to_proto",
    "progress_from_proto",
    "progress_to_proto",
]

_OPTIONAL_TIMES = ("last_attempt_at", "next_attempt_at", "finished_at")


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


def error_to_proto(error: MessageError) -> common_pb2.MessageError:
    """A record's error (``occurred_at`` 0 = unknown, left unset)."""
    out = common_pb2.MessageError(
        kind=common_pb2.MessageErrorKind.ValueType(int(error.kind)),
        detail=error.detail,
        envelope_fault=common_pb2.EnvelopeFault.ValueType(error.envelope_fault),
        attempt=error.attempt,
    )
    if error.occurred_at:
        out.occurred_at.CopyFrom(timestamp(error.occurred_at))
    return out


def error_from_proto(error: common_pb2.MessageError) -> MessageError:
    """The domain error; an unset ``occurred_at`` is 0."""
    return MessageError(
        kind=MessageErrorKind(error.kind),
        detail=error.detail,
        envelope_fault=int(error.envelope_fault),
        attempt=error.attempt,
        occurred_at=seconds(error.occurred_at) if error.HasField("occurred_at") else 0.0,
    )


def progress_to_proto(progress: SendProgress) -> common_pb2.SendProgress:
    """Outbox progress; unset optional instants stay unset."""
    out = common_pb2.SendProgress(
        state=common_pb2.SendState.ValueType(int(progress.state)),
        priority=common_pb2.SendPriority.ValueType(int(progress.priority)),
        attempts=progress.attempts,
        max_attempts=progress.max_attempts,
        relayed_peers=progress.relayed_peers,
        store_confirmation=progress.store_confirmation,
        scheduled_at=timestamp(progress.scheduled_at),
    )
    for name in _OPTIONAL_TIMES:
        value = getattr(progress, name)
        if value is not None:
            getattr(out, name).CopyFrom(timestamp(value))
    return out


def progress_from_proto(progress: common_pb2.SendProgress) -> SendProgress:
    """The domain progress; unset optional instants are None."""

    def optional(name: str) -> float | None:
        return seconds(getattr(progress, name)) if progress.HasField(name) else None  # type: ignore[arg-type]

    return SendProgress(
        state=SendState(progress.state),
        priority=SendPriority(progress.priority),
        attempts=progress.attempts,
        max_attempts=progress.max_attempts,
        relayed_peers=progress.relayed_peers,
        store_confirmation=progress.store_confirmation,
        scheduled_at=seconds(progress.scheduled_at),
        last_attempt_at=optional("last_attempt_at"),
        next_attempt_at=optional("next_attempt_at"),
        finished_at=optional("finished_at"),
    )
