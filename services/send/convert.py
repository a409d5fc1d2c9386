"""Proto ⇄ domain values of the send service (the enums share their numbers with msgstore.types)."""

from __future__ import annotations

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2
from meshcore.protoconv import timestamp
from msgproto.common import error_to_proto, message_to_proto, progress_to_proto
from msgstore.types import (
    ConfirmMode,
    Message,
    OutboxEntry,
    OutboxFilter,
    SendPriority,
    SendState,
)
from services.send.errors import InvalidMessage
from services.send.validation import SendInput

__all__ = ["filter_from", "input_from", "state_to", "status_to", "watch_start"]

_MAX_IDS = 1000  # send.proto ListSendStatusesRequest.request_ids: at most 1000


def _enum(cls: type[SendPriority] | type[ConfirmMode], value: int, what: str) -> int:
    try:
        return int(cls(value))
    except ValueError as err:
        raise InvalidMessage(f"unknown {what} {value}") from err


def input_from(request: send_pb2.SendRequest) -> SendInput:
    """The domain input of a Send call; the message is required."""
    if not request.HasField("message"):
        raise InvalidMessage("message is required")
    m = request.message
    message = Message(
        payload=m.payload,
        content_topic=m.content_topic,
        version=m.version if m.HasField("version") else None,
        timestamp=m.timestamp if m.HasField("timestamp") else None,
        meta=m.meta if m.HasField("meta") else None,
        rate_limit_proof=m.rate_limit_proof if m.HasField("rate_limit_proof") else None,
        ephemeral=m.ephemeral if m.HasField("ephemeral") else None,
    )
    ttl = request.ttl.seconds + request.ttl.nanos / 1e9 if request.HasField("ttl") else 0.0
    return SendInput(
        request_id=request.request_id,
        pubsub_topic=request.pubsub_topic,
        message=message,
        priority=SendPriority(_enum(SendPriority, request.priority, "priority")),
        confirm_mode=ConfirmMode(_enum(ConfirmMode, request.confirm_mode, "confirm_mode")),
        monitor_content_topic=request.monitor_content_topic,
        ttl_s=ttl,
    )


def state_to(state: SendState) -> common_pb2.SendState.ValueType:
    """A SendState as its proto number."""
    return common_pb2.SendState.ValueType(int(state))


def status_to(e: OutboxEntry) -> send_pb2.SendStatus:
    """An outbox entry as the SendStatus the API shows."""
    out = send_pb2.SendStatus(
        request_id=e.request_id,
        message_hash=e.message_hash,
        pubsub_topic=e.pubsub_topic,
        message=message_to_proto(e.message),
        sending=e.sending,
        sent=e.sent,
        stored=e.stored,
        progress=progress_to_proto(e.progress),
        envelope_hash=e.envelope_hash,
        sequence=e.sequence,
        updated_at=timestamp(e.updated_at),
    )
    if e.error is not None:
        out.error.CopyFrom(error_to_proto(e.error))
    if e.sent_at is not None:
        out.sent_at.CopyFrom(timestamp(e.sent_at))
    if e.stored_at is not None:
        out.stored_at.CopyFrom(timestamp(e.stored_at))
    return out


def filter_from(request: send_pb2.ListSendStatusesRequest) -> OutboxFilter:
    """The outbox filter of a listing request."""
    if len(request.request_ids) > _MAX_IDS:
        raise InvalidMessage(f"at most {_MAX_IDS} request ids per listing")
    if request.message_hash and len(request.message_hash) != 32:
        raise InvalidMessage("message_hash must be 32 bytes")
    try:
        states = tuple(SendState(s) for s in request.states)
    except ValueError as err:
        raise InvalidMessage(f"unknown state: {err}") from err
    return OutboxFilter(
        request_ids=tuple(request.request_ids),
        message_hash=request.message_hash,
        content_topic=request.content_topic,
        states=states,
    )


def watch_start(request: send_pb2.WatchSendStatusesRequest) -> bytes | None:
    """The resume position: None = live changes only, empty = everything retained."""
    return request.after_position if request.HasField("after_position") else None
