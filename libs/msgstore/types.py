"""Pure domain values of the Messaging API store, independent of generated protos and drivers.

The enums mirror ``mailmesh.common.v1`` / ``mailmesh.subscription.v1`` number for number (SendState,
SendPriority, MessageOrigin, MessageErrorKind, HealthStatus, EventType) and ``mailmesh.send.v1.ConfirmMode``,
so the services translate by value. Every instant is UNIX seconds as a ``float`` (stored as a double by both
backends, so it round-trips exactly); every span is seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "RESERVED_SUBSCRIPTION_ID",
    "ConfirmMode",
    "Event",
    "EventDraft",
    "EventType",
    "Gap",
    "HealthChange",
    "HealthStatus",
    "Lease",
    "Member",
    "Message",
    "MessageError",
    "MessageErrorKind",
    "MessageOrigin",
    "OutboxChange",
    "OutboxChanges",
    "OutboxEntry",
    "OutboxFilter",
    "Record",
    "SendPriority",
    "SendProgress",
    "SendState",
    "Subscription",
    "now",
]

#: The background subscription of ``confirmContentTopics`` (MESSAGING-API, "Acknowledgements").
RESERVED_SUBSCRIPTION_ID = "1692854c-cbde-4afe-901f-1c86ecbd9ea1"


def now() -> float:
    """The wall clock as the store's APIs take it (UNIX seconds)."""
    return time.time()


class SendState(IntEnum):
    """Where a send request is in the outbox (``mailmesh.common.v1.SendState``)."""

    UNSPECIFIED = 0
    QUEUED = 1
    SENDING = 2
    RETRY_WAIT = 3
    PAUSED = 4
    AWAITING_STORE = 5
    SUCCEEDED = 6
    FAILED = 7
    CANCELED = 8

    @property
    def is_final(self) -> bool:
        """SUCCEEDED, FAILED and CANCELED: the request is finished (its change log starts to age out)."""
        return self in (SendState.SUCCEEDED, SendState.FAILED, SendState.CANCELED)


class SendPriority(IntEnum):
    """Relative priority of a send request (``mailmesh.common.v1.SendPriority``)."""

    UNSPECIFIED = 0
    LOW = 1
    NORMAL = 2
    HIGH = 3


class ConfirmMode(IntEnum):
    """When a request counts as done (``mailmesh.send.v1.ConfirmMode``)."""

    UNSPECIFIED = 0
    STORE = 1
    SENT_ONLY = 2


class MessageOrigin(IntEnum):
    """Where a message record came from (``mailmesh.common.v1.MessageOrigin``)."""

    UNSPECIFIED = 0
    SEND = 1
    SUBSCRIPTION = 2


class MessageErrorKind(IntEnum):
    """Classifies a record's error (``mailmesh.common.v1.MessageErrorKind``)."""

    UNSPECIFIED = 0
    NO_PEERS = 1
    REJECTED = 2
    NOT_STORED = 3
    RETRIES_EXHAUSTED = 4
    DECODE = 5
    INTERNAL = 6


class HealthStatus(IntEnum):
    """Node health (MESSAGING-API, "Health Indicator"; ``mailmesh.common.v1.HealthStatus``)."""

    UNSPECIFIED = 0
    UNHEALTHY = 1
    MINIMALLY_HEALTHY = 2
    HEALTHY = 3


class EventType(IntEnum):
    """The Messaging API events (MESSAGING-API, "Events"; ``mailmesh.subscription.v1.EventType``).

    ``UNSPECIFIED`` is no Messaging API event: in the log it is the revision entry of a record change that
    emits none (another subscription id, new send progress), so a long poll over the records
    (``PollRecords``) sees every change; event consumers never receive it.
    """

    UNSPECIFIED = 0
    HEALTH_CHANGE = 1
    MESSAGE_CHANGE = 2
    MESSAGE_SENT = 3
    MESSAGE_ERROR = 4
    MESSAGE_RECEIVED = 5
    MESSAGE_STORED = 6

    @property
    def spec_name(self) -> str:
        """The spec's event name, e.g. ``message:sent``."""
        return _EVENT_NAMES[self]


_EVENT_NAMES = {
    EventType.UNSPECIFIED: "",
    EventType.HEALTH_CHANGE: "health:change",
    EventType.MESSAGE_CHANGE: "message:change",
    EventType.MESSAGE_SENT: "message:sent",
    EventType.MESSAGE_ERROR: "message:error",
    EventType.MESSAGE_RECEIVED: "message:received",
    EventType.MESSAGE_STORED: "message:stored",
}


@dataclass(frozen=True, slots=True)
class Lease:
    """A held lease: ``epoch`` is the fencing token, strictly greater for every new holder of ``name``."""

    name: str
    owner: str
    epoch: int
    expires_at: float
    ttl: float


@dataclass(frozen=True, slots=True)
class Member:
    """A live member of a group (a send replica among its peers): alive until ``expires_at`` unless its
    heartbeat renews it, reachable at ``address`` (``host:port`` of its gRPC server)."""

    group: str
    name: str
    address: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class Message:
    """A 14/WAKU2-MESSAGE (``mailmesh.common.v1.WakuMessage``); None = the optional field is absent."""

    payload: bytes
    content_topic: str
    version: int | None = None
    timestamp: int | None = None
    meta: bytes | None = None
    rate_limit_proof: bytes | None = None
    ephemeral: bool | None = None


@dataclass(frozen=True, slots=True)
class MessageError:
    """A record's or request's ``error`` (``mailmesh.common.v1.MessageError``)."""

    kind: MessageErrorKind
    detail: str
    envelope_fault: int = 0
    attempt: int = 0
    occurred_at: float = 0.0


@dataclass(frozen=True, slots=True)
class SendProgress:
    """Outbox state, attempts and timing (``mailmesh.common.v1.SendProgress``)."""

    state: SendState
    priority: SendPriority
    attempts: int
    max_attempts: int
    relayed_peers: int
    store_confirmation: bool
    scheduled_at: float
    last_attempt_at: float | None = None
    next_attempt_at: float | None = None
    finished_at: float | None = None


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """One send request as the outbox holds it: everything ``SendStatus`` exposes, plus the Send options.

    ``sequence`` is the entry's position in its shard's change log (0 until its owner first saved it);
    the store sets it on :meth:`~msgstore.protocol.OutboxStore.save`. ``traceparent`` is the W3C trace
    context (Trace Context, "traceparent Header") of the Send or Resend call that queued the request, empty
    when it had none: every replica's attempts join that trace, after a restart too.
    """

    request_id: str
    message_hash: bytes
    pubsub_topic: str
    message: Message
    progress: SendProgress
    confirm_mode: ConfirmMode = ConfirmMode.UNSPECIFIED
    monitor_content_topic: bool = False
    ttl: float = 0.0
    sending: bool = False
    sent: bool = False
    stored: bool = False
    error: MessageError | None = None
    envelope_hash: bytes = b""
    sequence: int = 0
    updated_at: float = 0.0
    sent_at: float | None = None
    stored_at: float | None = None
    traceparent: str = ""

    @property
    def state(self) -> SendState:
        """The outbox state (``progress.state``)."""
        return self.progress.state

    def repeats(self, other: OutboxEntry) -> bool:
        """Whether ``other`` is a repeat of this request's Send: same pubsub topic and message.

        ``timestamp`` absent (None or 0) in ``other`` means "now" (``SendRequest.message``), so it matches
        the timestamp this entry was given; a timestamp that is given must be equal.
        """
        mine, theirs = self.message, other.message
        return (
            self.pubsub_topic == other.pubsub_topic
            and mine.payload == theirs.payload
            and mine.content_topic == theirs.content_topic
            and (mine.version or 0) == (theirs.version or 0)
            and (mine.meta or b"") == (theirs.meta or b"")
            and (mine.rate_limit_proof or b"") == (theirs.rate_limit_proof or b"")
            and bool(mine.ephemeral) == bool(theirs.ephemeral)
            and (not theirs.timestamp or theirs.timestamp == mine.timestamp)
        )


@dataclass(frozen=True, slots=True)
class OutboxFilter:
    """``ListSendStatuses`` filters, ANDed; empty = any."""

    request_ids: tuple[str, ...] = ()
    message_hash: bytes = b""
    content_topic: str = ""
    states: tuple[SendState, ...] = ()


@dataclass(frozen=True, slots=True)
class OutboxChange:
    """One change of one request in its shard's log: the entry's full state after the change."""

    shard: int
    sequence: int
    changed_at: float
    entry: OutboxEntry


@dataclass(frozen=True, slots=True)
class OutboxChanges:
    """A page of :meth:`~msgstore.protocol.OutboxStore.changes_after` and where to resume after it."""

    changes: list[OutboxChange]
    position: bytes
    #: Shards whose resume point was older than their retained changes (changes were missed there): the
    #: consumer reloads those shards' requests from the outbox itself.
    gaps: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Record:
    """A Messaging API ``MessageRecord`` keyed by ``message_hash`` (``mailmesh.common.v1.MessageRecord``).

    ``revision`` is drawn from the event counter by the writer (MESSAGE_CHANGE's sequence when the change
    emits events); ``created_at`` orders the listings and never changes once written.
    """

    message_hash: bytes
    pubsub_topic: str
    message: Message
    origin: MessageOrigin
    created_at: float
    request_id: str = ""
    sending: bool = False
    sent: bool = False
    stored: bool = False
    received: bool = False
    error: MessageError | None = None
    envelope_hash: bytes = b""
    subscription_ids: tuple[str, ...] = ()
    revision: int = 0
    send_progress: SendProgress | None = None
    updated_at: float = 0.0
    sent_at: float | None = None
    stored_at: float | None = None
    received_at: float | None = None


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription, active or ended (``mailmesh.subscription.v1.Subscription`` plus its end)."""

    subscription_id: str
    pubsub_topic: str
    content_topics: tuple[str, ...]
    envelope_topics: tuple[bytes, ...]
    created_at: float
    background: bool = False
    store_confirmation: bool = False
    active: bool = True
    ended_at: float | None = None
    received_count: int = 0


@dataclass(frozen=True, slots=True)
class HealthChange:
    """Payload of ``health:change``."""

    status: HealthStatus
    previous: HealthStatus


@dataclass(frozen=True, slots=True)
class EventDraft:
    """An event to append: about the record with ``message_hash`` committed with it, or a health change."""

    type: EventType
    message_hash: bytes = b""
    health: HealthChange | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """A stored event: node-wide ``sequence``, and the record state (or health change) it reports."""

    sequence: int
    type: EventType
    emitted_at: float
    record: Record | None = None
    health: HealthChange | None = None


@dataclass(frozen=True, slots=True)
class Gap:
    """A resume point older than the retention window: events after it are gone.

    ``oldest`` is the oldest sequence still retained (the head + 1 when nothing is); a consumer resumes
    after ``oldest - 1`` having missed some events (gRPC OUT_OF_RANGE, SEQUENCE_EXPIRED, "oldest").
    """

    oldest: int
