"""The REST API's JSON bodies as pydantic models: request validation and the OpenAPI 3.1 document.

Field names, types and examples follow MESSAGING-API's REST sections ("Send", "Subscribe", "Message Storage",
"Health Indicator"); payloads and meta are standard, padded base64. Models are strict: a JSON string is never
taken for a number or a boolean, so a wrong type is a 400 naming the field (:mod:`.errors`). Every constraint
the gateway checks is in the schema (patterns, lengths, ranges), so the served document says exactly what is
accepted. Fields the spec does not name are ignored, as JSON APIs usually do.

Responses are written by :mod:`.convert` as plain dicts for speed; the response models here only describe
them (OpenAPI) and are what the schema tests hold the answers to.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

__all__ = [
    "BASE64_PATTERN",
    "GUID_PATTERN",
    "CancelBody",
    "ErrorBody",
    "EventItem",
    "EventsPage",
    "GoneBody",
    "HealthBody",
    "MessageBody",
    "RecordBody",
    "RequestIdBody",
    "SendFields",
    "StatusOk",
    "SubscribeBody",
    "SubscriptionIdBody",
    "UnsubscribeBody",
    "base64_length",
    "send_body",
]

#: Standard base64 (RFC 4648 §4), padded: what MESSAGING-API's examples use ("ZXhhbXBsZQ==").
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
#: A GUID in the lowercase 8-4-4-4-12 form Mailmesh issues (MESSAGING-API "RequestID", "SubscriptionID").
GUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
#: 23/WAKU2-TOPICS: /{application}/{version}/{name}/{encoding}, optionally after a /{generation} prefix.
CONTENT_TOPIC_PATTERN = r"^(?:/[^/]+)?/[^/]+/[^/]+/[^/]+/[^/]+$"
MAX_META = 64  # 14/WAKU2-MESSAGE: meta is at most 64 bytes
HEALTH_STATUSES = ("Unhealthy", "MinimallyHealthy", "Healthy")
CONNECTION_STATUSES = ("Disconnected", "PartiallyConnected", "Connected")

HealthStatus = Literal["Unhealthy", "MinimallyHealthy", "Healthy"]
ConnectionStatus = Literal["Disconnected", "PartiallyConnected", "Connected"]


def base64_length(raw_bytes: int) -> int:
    """Characters of padded base64 for ``raw_bytes`` bytes."""
    return 4 * ((raw_bytes + 2) // 3)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class SendFields(_Strict):
    """MESSAGING-API REST `send`: the message to send and where (the payload's bound is the node's; see
    :func:`send_body`)."""

    model_config = ConfigDict(
        strict=True,
        extra="ignore",
        json_schema_extra={
            "example": {
                "timestamp": 0,
                "ephemeral": False,
                "meta": "ZXhhbXBsZQ==",
                "pubsubTopic": "/waku/2/rs/1/0",
                "contentTopic": "/waku/1/0x01020304/rfc26",
                "payload": "ZXhhbXBsZQ==",
            }
        },
    )

    payload: Annotated[str, Field(pattern=BASE64_PATTERN)]
    contentTopic: Annotated[  # noqa: N815 - the spec's JSON name
        str,
        Field(
            min_length=1,
            max_length=1024,
            pattern=CONTENT_TOPIC_PATTERN,
            description="23/WAKU2-TOPICS content topic, e.g. /waku/1/0x01020304/rfc26 (sent on that "
            "4-byte Waku v1 topic) or /app/1/name/proto (sent on its keccak256-derived topic).",
        ),
    ]
    pubsubTopic: Annotated[  # noqa: N815
        str,
        Field(
            max_length=1024,
            description="Static-sharding pubsub topic /waku/2/rs/<cluster>/<shard>; omitted or empty = "
            "the node's first shard. One the node does not serve is a 404.",
        ),
    ] = ""
    meta: Annotated[
        str | None,
        Field(
            pattern=BASE64_PATTERN,
            max_length=base64_length(MAX_META),
            description="Application metadata, base64, at most 64 bytes (14/WAKU2-MESSAGE).",
        ),
    ] = None
    timestamp: Annotated[
        int,
        Field(
            ge=0,
            le=2**63 - 1,
            description="Generation time, UNIX nanoseconds; 0 or omitted = now. Waku v1 carries whole "
            "seconds: it must be within the envelope TTL (120 s) in the past and at most 10 s ahead.",
        ),
    ] = 0
    ephemeral: Annotated[bool, Field(description="True: relayed but never archived (14/WAKU2-MESSAGE).")] = (
        False
    )


def send_body(max_payload_bytes: int) -> type[SendFields]:
    """The ``POST /send`` body model for a node whose payloads may be ``max_payload_bytes`` long."""
    payload = Annotated[
        str,
        Field(
            pattern=BASE64_PATTERN,
            max_length=base64_length(max_payload_bytes),
            description=f"The message payload, standard padded base64; at most {max_payload_bytes} bytes "
            "(the max message size less the 20-byte envelope header).",
            examples=["ZXhhbXBsZQ=="],
        ),
    ]
    model: type[SendFields] = create_model("SendBody", __base__=SendFields, payload=(payload, ...))
    model.__doc__ = SendFields.__doc__
    return model


class RequestIdBody(BaseModel):
    """Answer of `POST /send`."""

    requestId: Annotated[str, Field(pattern=GUID_PATTERN, examples=["9978c4f1-4465-4537-9d95-0cf016fb1080"])]  # noqa: N815


class CancelBody(_Strict):
    """MESSAGING-API REST `cancelRequest`."""

    requestId: Annotated[  # noqa: N815
        str,
        Field(
            pattern=GUID_PATTERN,
            description="The RequestID to cancel; an unknown or finished one is ignored.",
            examples=["9978c4f1-4465-4537-9d95-0cf016fb1080"],
        ),
    ]


class StatusOk(BaseModel):
    """`{"status": "ok"}`."""

    status: Literal["ok"]


class SubscribeBody(_Strict):
    """MESSAGING-API REST `subscribe`."""

    contentTopic: Annotated[  # noqa: N815
        str,
        Field(
            min_length=1,
            max_length=1024,
            pattern=CONTENT_TOPIC_PATTERN,
            description="The content topic to receive (23/WAKU2-TOPICS).",
            examples=["/waku/1/0x01020304/rfc26"],
        ),
    ]
    pubsubTopic: Annotated[  # noqa: N815
        str,
        Field(
            max_length=1024,
            description="/waku/2/rs/<cluster>/<shard>; omitted or empty = the node's first shard. Another "
            "cluster is a 404 (`Cannot create subscription. clusterId <n> is not supported.`).",
            examples=["/waku/2/rs/1/0"],
        ),
    ] = ""


class SubscriptionIdBody(BaseModel):
    """Answer of `POST /subscribe`."""

    subscriptionId: Annotated[str, Field(pattern=GUID_PATTERN)]  # noqa: N815


class UnsubscribeBody(_Strict):
    """MESSAGING-API REST `unsubscribe`."""

    subscriptionId: Annotated[  # noqa: N815
        str,
        Field(
            pattern=GUID_PATTERN,
            description="The SubscriptionID to stop; an unknown one (and the reserved background "
            "subscription) is ignored.",
            examples=["9978c4f1-4465-4537-9d95-0cf016fb1080"],
        ),
    ]


class MessageBody(BaseModel):
    """A 14/WAKU2 message as records show it; optional attributes appear only when set."""

    payload: Annotated[str, Field(description="Standard padded base64.")]
    contentTopic: str  # noqa: N815
    meta: Annotated[str | None, Field(description="Base64; absent when the message has none.")] = None
    version: int | None = None
    timestamp: Annotated[int | None, Field(description="UNIX nanoseconds.")] = None
    ephemeral: bool | None = None


class RecordBody(BaseModel):
    """MESSAGING-API `MessageRecord`, plus the message hash and pubsub topic it is keyed by."""

    sending: bool
    sent: bool
    stored: bool
    received: bool
    requestId: Annotated[  # noqa: N815
        str | None, Field(description="Only on messages this node sent (the Send API's RequestID).")
    ] = None
    messageHash: Annotated[  # noqa: N815
        str,
        Field(
            pattern=r"^0x[0-9a-f]{64}$",
            description="14/WAKU2 deterministic message hash, 0x-prefixed lowercase hex (what "
            "`GET /message?hash=` takes).",
        ),
    ]
    pubsubTopic: str  # noqa: N815
    message: MessageBody
    error: Annotated[str | None, Field(description="Why sending or receiving failed; absent otherwise.")] = (
        None
    )


class HealthBody(BaseModel):
    """MESSAGING-API REST `GET /health`, plus the same state in the newer WAKU-API vocabulary."""

    status: HealthStatus
    connectionStatus: ConnectionStatus  # noqa: N815


class EventItem(BaseModel):
    """One event of MESSAGING-API "Event source"."""

    sequence: Annotated[int, Field(ge=1, description="Node-wide, strictly increasing; resume after it.")]
    event: Annotated[
        str,
        Field(
            description="health:change, message:change, message:sent, message:error, message:received or "
            "message:stored."
        ),
    ]
    wakuApiEvent: Annotated[  # noqa: N815
        str | None,
        Field(
            description="The same event's WAKU-API name where it has one (message:send-propagated, "
            "message:send-error, health:connection-status)."
        ),
    ] = None
    emittedAt: Annotated[str, Field(description="RFC 3339, UTC.")]  # noqa: N815
    detail: Annotated[
        RecordBody | HealthStatus,
        Field(description="The spec's event.detail: the updated MessageRecord, or the new HealthStatus."),
    ]
    previous: Annotated[HealthStatus | None, Field(description="health:change: the status before.")] = None
    connectionStatus: Annotated[  # noqa: N815
        ConnectionStatus | None, Field(description="health:change: `detail` in the WAKU-API vocabulary.")
    ] = None


class EventsPage(BaseModel):
    """Answer of `GET /events`."""

    events: list[EventItem]
    lastSequence: Annotated[  # noqa: N815
        int, Field(ge=0, description="Pass as `after` in the next poll (the last event's, or the head).")
    ]


class ErrorBody(BaseModel):
    """Every error: `{"error": "<what is wrong, which field>"}` (MESSAGING-API REST examples)."""

    error: str


class GoneBody(ErrorBody):
    """410: the resume point is older than the retained events."""

    oldest: Annotated[int, Field(ge=0, description="The oldest sequence still retained.")]
