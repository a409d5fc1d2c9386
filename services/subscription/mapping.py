"""From a Waku v1 envelope seen on an edge peer's live feed to the messages the active subscriptions receive.

Waku v1 carries no content topic, pubsub topic, meta or version: an envelope has a 4-byte topic, ``Data``
and a sent time. A subscription asked for content topics, each of which maps to a 4-byte topic
(``wakucodec.contenttopic``: ``/waku/1/0x<8 hex>/rfc26`` names its topic directly, anything else travels
on the first 4 bytes of its keccak256). So an envelope on topic ``t`` is, for every active subscription
with a content topic that maps to ``t``, the 14/WAKU2 message ``{payload: Data, content_topic: that
content topic, timestamp: sent x 1e9}`` on the subscription's pubsub topic — the mapping nwaku's v1 bridge
used (``message_from_v1``: version 1, Data is already a 26/WAKU-PAYLOAD). Its hash follows 14/WAKU2
"Deterministic message hashing" over that pubsub topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from msgstore.types import Message, Subscription
from wakucodec.wakumessage import V1_BRIDGE_VERSION, WakuMessage, message_hash

__all__ = ["Reception", "TopicIndex", "receptions"]

_NS_PER_SECOND = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Reception:
    """One subscription's reception of one envelope."""

    subscription_id: str
    pubsub_topic: str
    message: Message
    message_hash: bytes


class TopicIndex:
    """The active subscriptions by 4-byte topic, in subscription order (rebuilt when the set changes)."""

    def __init__(self, subscriptions: Iterable[Subscription] = ()) -> None:
        self._subscriptions: dict[str, Subscription] = {}
        self._by_topic: dict[bytes, list[tuple[Subscription, str]]] = {}
        for sub in subscriptions:
            self.add(sub)

    def add(self, subscription: Subscription) -> None:
        """Index an active subscription."""
        self._subscriptions[subscription.subscription_id] = subscription
        self._rebuild()

    def remove(self, subscription_id: str) -> bool:
        """Forget a subscription; True when it was indexed."""
        found = self._subscriptions.pop(subscription_id, None) is not None
        if found:
            self._rebuild()
        return found

    def get(self, subscription_id: str) -> Subscription | None:
        """The indexed subscription with this id."""
        return self._subscriptions.get(subscription_id)

    @property
    def subscriptions(self) -> list[Subscription]:
        """Every indexed subscription, in the order they were added."""
        return list(self._subscriptions.values())

    @property
    def topics(self) -> frozenset[bytes]:
        """The union of the subscriptions' 4-byte topics: what the edge peers' feeds are filtered by."""
        return frozenset(self._by_topic)

    def matches(self, topic: bytes) -> Sequence[tuple[Subscription, str]]:
        """(subscription, its content topic on ``topic``) for every subscription listening on ``topic``."""
        return self._by_topic.get(topic, ())

    def _rebuild(self) -> None:
        by_topic: dict[bytes, list[tuple[Subscription, str]]] = {}
        for sub in self._subscriptions.values():
            seen: set[bytes] = set()
            for content_topic, topic in zip(sub.content_topics, sub.envelope_topics, strict=True):
                if topic not in seen:  # two content topics on one 4-byte topic: the first one names it
                    seen.add(topic)
                    by_topic.setdefault(topic, []).append((sub, content_topic))
        self._by_topic = by_topic


def receptions(
    index: TopicIndex, *, topic: bytes, data: bytes, sent: int, received_at: float = 0.0
) -> list[Reception]:
    """The messages the subscriptions listening on ``topic`` receive from one envelope.

    A subscription created after the edge peer accepted the envelope (``received_at``) does not receive it:
    MESSAGING-API "Subscribe" is about messages "circulating in the network after the Subscribe API call",
    and a replay of the edge peer's relay cache must not hand older envelopes to a new subscription.
    """
    found = []
    for sub, content_topic in index.matches(topic):
        if received_at and received_at < sub.created_at:
            continue
        msg = WakuMessage(
            payload=data,
            content_topic=content_topic,
            version=V1_BRIDGE_VERSION,
            timestamp=sent * _NS_PER_SECOND,
        )
        message = Message(
            payload=data, content_topic=content_topic, version=V1_BRIDGE_VERSION, timestamp=msg.timestamp
        )
        found.append(
            Reception(sub.subscription_id, sub.pubsub_topic, message, message_hash(sub.pubsub_topic, msg))
        )
    return found
