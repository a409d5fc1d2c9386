"""A Send request checked and turned into the outbox entry it schedules (pure: no I/O, no gRPC).

MESSAGING-API "Send": the node refuses a pubsub topic it does not serve; 14/WAKU2-MESSAGE bounds ``meta``
(64 bytes) and defines the deterministic hash; Waku v1 (wire §1.1, §1.5) fixes what an envelope can carry:
the sent time is whole seconds, a receiver refuses envelopes more than 10 s in the future
(DefaultSyncAllowance) or past their expiry, and ``20 + len(Data)`` must fit the max message size.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from msgapi.errors import UnsupportedPubsubTopic as SpecUnsupportedTopic
from msgapi.topics import TopicPolicy
from msgstore.types import (
    ConfirmMode,
    Message,
    OutboxEntry,
    SendPriority,
    SendProgress,
    SendState,
)
from services.send.errors import InvalidMessage, UnsupportedPubsubTopic
from wakucodec.constants import DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_SYNC_ALLOWANCE
from wakucodec.contenttopic import ContentTopic
from wakucodec.errors import CodecError, InvalidTopic
from wakucodec.wakumessage import WakuMessage, message_hash

__all__ = [
    "MAX_META",
    "MIN_TTL",
    "SendInput",
    "SendRules",
    "prepare",
    "store_confirmation_applies",
    "without_timestamp",
]

NS_PER_S = 1_000_000_000
MAX_META = 64  # 14/WAKU2-MESSAGE: meta is at most 64 bytes
MIN_TTL = 10  # Status guidance (wire §1.6): shorter envelopes expire before most peers see them
MAX_TTL = 86_400
ENVELOPE_HEADER = 20  # Go envelope size(): 20 + len(Data) (wire §1.5 step 3)
_GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True, slots=True)
class SendInput:
    """What a Send call asks for, already out of its proto."""

    request_id: str
    pubsub_topic: str
    message: Message
    priority: SendPriority = SendPriority.NORMAL
    confirm_mode: ConfirmMode = ConfirmMode.UNSPECIFIED
    monitor_content_topic: bool = False
    ttl_s: float = 0.0


@dataclass(frozen=True, slots=True)
class SendRules:
    """The node settings validation and scheduling read."""

    topics: TopicPolicy
    default_ttl_s: int
    max_attempts: int
    store_confirmation: bool
    confirm_content_topics: frozenset[str]
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE


def store_confirmation_applies(
    inp: SendInput, content_topic: str, rules: SendRules, *, subscribed: bool = False
) -> bool:
    """Whether the request waits for the store (send.proto ``ConfirmMode``; MESSAGING-API "Acknowledgements").

    STORE: always; SENT_ONLY: never; otherwise when ``storeConfirmation`` is on and the content topic is in
    ``confirmContentTopics``, or covered by an active subscription (``subscribed``), or the request asks to
    monitor it. MESSAGING-API "storeConfirmation": with ``confirmContentTopics`` the store query MUST run for
    them; without, it starts "only after the Subscribe API is called"; off, ``stored`` "MUST NOT be
    populated" (History API aside) — so a subscription alone never turns it on. Ephemeral messages are never
    archived, so never confirmed.
    """
    if inp.message.ephemeral:
        return False
    if inp.confirm_mode is ConfirmMode.STORE:
        return True
    if inp.confirm_mode is ConfirmMode.SENT_ONLY:
        return False
    monitored = inp.monitor_content_topic or subscribed or content_topic in rules.confirm_content_topics
    return rules.store_confirmation and monitored


def _content_topic(text: str) -> str:
    try:
        return str(ContentTopic.parse(text))
    except InvalidTopic as err:
        raise InvalidMessage(f"invalid content topic: {err}") from err


class _RandomIds:
    """UUID v4 strings from the OS's cryptographic source, 16 bytes each, read 4 KiB at a time: one
    ``getrandom`` per 256 ids instead of one per Send (a syscall costs tens of microseconds in this sandbox,
    a measurable share of a Send). Ids stay unguessable: they are a caller's handle for Cancel."""

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def next(self) -> str:
        """A fresh random request id."""
        if self._at >= len(self._pool):
            self._pool, self._at = os.urandom(16 * 256), 0
        raw = self._pool[self._at : self._at + 16]
        self._at += 16
        return str(uuid.UUID(bytes=raw, version=4))


_ids = _RandomIds()


def _request_id(given: str) -> str:
    if not given:
        return _ids.next()
    if not _GUID.match(given):
        raise InvalidMessage(f"requestId must be a lowercase 8-4-4-4-12 GUID, got {given[:64]!r}")
    return given


def _ttl(inp: SendInput, rules: SendRules) -> int:
    if not inp.ttl_s:
        return rules.default_ttl_s
    if inp.ttl_s != int(inp.ttl_s) or not MIN_TTL <= inp.ttl_s <= MAX_TTL:
        raise InvalidMessage(f"ttl must be whole seconds in {MIN_TTL}..{MAX_TTL}, got {inp.ttl_s}")
    return int(inp.ttl_s)


def _sent_time(timestamp_ns: int | None, ttl: int, now: float) -> int:
    """The envelope sent time (whole seconds) of the message timestamp; absent or 0 = now."""
    if not timestamp_ns:
        return int(now)
    sent = timestamp_ns // NS_PER_S
    if sent > now + DEFAULT_SYNC_ALLOWANCE:
        raise InvalidMessage(
            f"timestamp is more than {DEFAULT_SYNC_ALLOWANCE} s in the future; Waku v1 peers would refuse it"
        )
    if sent + ttl <= now:
        raise InvalidMessage("timestamp is older than the ttl: the envelope would already have expired")
    return int(sent)


def prepare(
    inp: SendInput, rules: SendRules, now: float, covered: Callable[[str, str], bool] = lambda p, c: False
) -> OutboxEntry:
    """The QUEUED outbox entry of a valid request; InvalidMessage / UnsupportedPubsubTopic otherwise.
    ``covered(pubsub topic, content topic)`` says whether an active subscription covers the message.

    The timestamp is truncated to whole seconds before hashing (send.proto ``SendRequest.message``), so the
    message hash is what a Waku v1 receiver derives from the envelope's sent time.
    """
    try:
        pubsub_topic = rules.topics.for_send(inp.pubsub_topic)
    except SpecUnsupportedTopic as err:
        raise UnsupportedPubsubTopic(str(err), inp.pubsub_topic) from err
    msg = inp.message
    content_topic = _content_topic(msg.content_topic)
    meta = msg.meta or b""
    if len(meta) > MAX_META:
        raise InvalidMessage(f"meta is {len(meta)} bytes; at most {MAX_META} (14/WAKU2-MESSAGE)")
    limit = rules.max_message_size - ENVELOPE_HEADER
    if len(msg.payload) > limit:
        raise InvalidMessage(f"payload is {len(msg.payload)} bytes; at most {limit} fit one envelope")
    if msg.ephemeral and inp.confirm_mode is ConfirmMode.STORE:
        raise InvalidMessage("an ephemeral message is never archived, so it cannot be store-confirmed")
    ttl = _ttl(inp, rules)
    sent = _sent_time(msg.timestamp, ttl, now)
    message = replace(msg, content_topic=content_topic, timestamp=sent * NS_PER_S)
    try:
        digest = message_hash(
            pubsub_topic,
            WakuMessage(
                payload=message.payload,
                content_topic=content_topic,
                version=message.version or 0,
                timestamp=sent * NS_PER_S,
                meta=meta,
                ephemeral=bool(message.ephemeral),
                rate_limit_proof=message.rate_limit_proof or b"",
            ),
        )
    except CodecError as err:  # InvalidPayload: a version out of range, a topic that is not unicode
        raise InvalidMessage(str(err)) from err
    priority = inp.priority if inp.priority is not SendPriority.UNSPECIFIED else SendPriority.NORMAL
    progress = SendProgress(
        state=SendState.QUEUED,
        priority=priority,
        attempts=0,
        max_attempts=rules.max_attempts,
        relayed_peers=0,
        store_confirmation=store_confirmation_applies(
            inp, content_topic, rules, subscribed=covered(pubsub_topic, content_topic)
        ),
        scheduled_at=now,
    )
    return OutboxEntry(
        request_id=_request_id(inp.request_id),
        message_hash=digest,
        pubsub_topic=pubsub_topic,
        message=message,
        progress=progress,
        confirm_mode=inp.confirm_mode,
        monitor_content_topic=inp.monitor_content_topic,
        ttl=float(ttl),
        sending=True,
        updated_at=now,
    )


def without_timestamp(entry: OutboxEntry) -> OutboxEntry:
    """``entry`` as a Send that left the timestamp absent: what a repeat of such a Send is compared as
    (``OutboxEntry.repeats``: an absent timestamp matches the one filled in with "now")."""
    return replace(entry, message=replace(entry.message, timestamp=None))
