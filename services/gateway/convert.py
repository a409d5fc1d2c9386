"""Protos to the REST API's JSON values (dicts ready for ``json.dumps``), and REST parameters to protos.

Spellings (MESSAGING-API REST examples): camelCase keys, payload and meta as standard padded base64, health as
``Unhealthy``/``MinimallyHealthy``/``Healthy``; message hashes as ``0x``-prefixed lowercase hex, the form
``GET /message?hash=`` accepts back. Optional message attributes and the record's ``requestId`` and ``error``
appear only when set (the spec: `requestId` "Defaults to null", `error` is "optional").
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from mailmesh.common.v1 import common_pb2
from mailmesh.subscription.v1 import subscription_pb2

__all__ = [
    "CONNECTION_NAMES",
    "EVENT_TYPES",
    "HEALTH_NAMES",
    "event_json",
    "health_json",
    "parse_hash",
    "record_json",
]

#: HealthStatus numbers → the spec's spelling (common.proto HealthStatus); 0 (not evaluated) has none.
HEALTH_NAMES: dict[int, str] = {
    common_pb2.HEALTH_STATUS_UNHEALTHY: "Unhealthy",
    common_pb2.HEALTH_STATUS_MINIMALLY_HEALTHY: "MinimallyHealthy",
    common_pb2.HEALTH_STATUS_HEALTHY: "Healthy",
}
#: ConnectionStatus numbers → the WAKU-API spelling (same numbers as HealthStatus).
CONNECTION_NAMES: dict[int, str] = {
    common_pb2.CONNECTION_STATUS_DISCONNECTED: "Disconnected",
    common_pb2.CONNECTION_STATUS_PARTIALLY_CONNECTED: "PartiallyConnected",
    common_pb2.CONNECTION_STATUS_CONNECTED: "Connected",
}
#: Event names a filter may use (MESSAGING-API "Events", and their WAKU-API names) → EventType numbers.
EVENT_TYPES: dict[str, int] = {
    "health:change": subscription_pb2.EVENT_TYPE_HEALTH_CHANGE,
    "message:change": subscription_pb2.EVENT_TYPE_MESSAGE_CHANGE,
    "message:sent": subscription_pb2.EVENT_TYPE_MESSAGE_SENT,
    "message:error": subscription_pb2.EVENT_TYPE_MESSAGE_ERROR,
    "message:received": subscription_pb2.EVENT_TYPE_MESSAGE_RECEIVED,
    "message:stored": subscription_pb2.EVENT_TYPE_MESSAGE_STORED,
    "health:connection-status": subscription_pb2.EVENT_TYPE_HEALTH_CHANGE,
    "message:send-propagated": subscription_pb2.EVENT_TYPE_MESSAGE_SENT,
    "message:send-error": subscription_pb2.EVENT_TYPE_MESSAGE_ERROR,
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _rfc3339(seconds: int, nanos: int) -> str:
    stamp = datetime.fromtimestamp(seconds + nanos / 1e9, UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_hash(text: str) -> bytes | None:
    """A message hash from REST: 32 bytes of hex, ``0x`` optional, any case; None when it is not one."""
    raw = text[2:] if text[:2].lower() == "0x" else text
    if len(raw) != 64:
        return None
    try:
        return bytes.fromhex(raw)
    except ValueError:
        return None


def message_json(message: common_pb2.WakuMessage) -> dict[str, Any]:
    """A 14/WAKU2 message; absent optional attributes stay absent."""
    out: dict[str, Any] = {"payload": _b64(message.payload), "contentTopic": message.content_topic}
    if message.HasField("meta"):
        out["meta"] = _b64(message.meta)
    if message.HasField("version"):
        out["version"] = message.version
    if message.HasField("timestamp"):
        out["timestamp"] = message.timestamp
    if message.HasField("ephemeral"):
        out["ephemeral"] = message.ephemeral
    return out


def record_json(record: common_pb2.MessageRecord) -> dict[str, Any]:
    """A MessageRecord as the REST API shows it (MESSAGING-API "Message Storage", REST examples)."""
    out: dict[str, Any] = {
        "sending": record.sending,
        "sent": record.sent,
        "stored": record.stored,
        "received": record.received,
    }
    if record.request_id:
        out["requestId"] = record.request_id
    out["messageHash"] = "0x" + record.message_hash.hex()
    out["pubsubTopic"] = record.pubsub_topic
    out["message"] = message_json(record.message)
    if record.HasField("error"):
        out["error"] = record.error.detail or "error"
    return out


def health_json(report: Any) -> dict[str, Any]:
    """`GET /health`: ``{"status": ..., "connectionStatus": ...}`` of a HealthReport (status evaluated)."""
    return {
        "status": HEALTH_NAMES[report.status],
        "connectionStatus": CONNECTION_NAMES[report.connection_status or report.status],
    }


def event_json(event: subscription_pb2.Event) -> dict[str, Any]:
    """One event: sequence, names, time and the spec's ``detail`` (a record, or the new HealthStatus)."""
    out: dict[str, Any] = {"sequence": event.sequence, "event": event.name}
    if event.waku_api_name:
        out["wakuApiEvent"] = event.waku_api_name
    out["emittedAt"] = _rfc3339(event.emitted_at.seconds, event.emitted_at.nanos)
    if event.HasField("health"):
        health = event.health
        out["detail"] = HEALTH_NAMES.get(health.status, "Unhealthy")
        if health.previous in HEALTH_NAMES:
            out["previous"] = HEALTH_NAMES[health.previous]
        out["connectionStatus"] = CONNECTION_NAMES.get(
            health.connection_status or health.status, "Disconnected"
        )
    else:
        out["detail"] = record_json(event.record)
    return out
