"""From a v1 envelope to the messages the subscriptions receive, and the topic index the feeds filter by."""

from __future__ import annotations

from msgstore.types import Subscription
from services.subscription.mapping import TopicIndex, receptions
from wakucodec.contenttopic import content_topic_to_v1_topic
from wakucodec.wakumessage import WakuMessage, message_hash

BRIDGED = "/waku/1/0x01020304/rfc26"
CHAT = "/app/1/chat/proto"


def sub(sid: str, *topics: str, pubsub: str = "/waku/2/rs/1/0") -> Subscription:
    return Subscription(
        subscription_id=sid,
        pubsub_topic=pubsub,
        content_topics=topics,
        envelope_topics=tuple(content_topic_to_v1_topic(t) for t in topics),
        created_at=1.0,
    )


def test_a_bridged_topic_names_its_four_bytes_and_the_message_follows_the_v1_bridge() -> None:
    index = TopicIndex([sub("s1", BRIDGED)])
    assert index.topics == {b"\x01\x02\x03\x04"}
    (r,) = receptions(index, topic=b"\x01\x02\x03\x04", data=b"payload", sent=1_700_000_000)
    assert (r.subscription_id, r.message.content_topic, r.message.payload) == ("s1", BRIDGED, b"payload")
    assert (r.message.timestamp, r.message.version) == (1_700_000_000 * 10**9, 1)
    expected = WakuMessage(
        payload=b"payload", content_topic=BRIDGED, version=1, timestamp=1_700_000_000 * 10**9
    )
    assert r.message_hash == message_hash("/waku/2/rs/1/0", expected)


def test_every_subscription_on_the_topic_receives_with_its_own_pubsub_topic() -> None:
    index = TopicIndex([sub("s1", CHAT), sub("s2", CHAT, pubsub="/waku/2/rs/1/3"), sub("s3", BRIDGED)])
    got = receptions(index, topic=content_topic_to_v1_topic(CHAT), data=b"x", sent=5)
    assert [r.subscription_id for r in got] == ["s1", "s2"]
    assert got[0].message_hash != got[1].message_hash  # the pubsub topic enters the hash


def test_an_envelope_on_no_subscribed_topic_is_nobody_s() -> None:
    assert receptions(TopicIndex([sub("s1", CHAT)]), topic=b"\xff\xff\xff\xff", data=b"", sent=1) == []


def test_removing_a_subscription_drops_its_topics_at_once() -> None:
    index = TopicIndex([sub("s1", CHAT), sub("s2", BRIDGED)])
    assert index.remove("s1")
    assert index.topics == {b"\x01\x02\x03\x04"}
    assert not index.remove("s1")
    assert receptions(index, topic=content_topic_to_v1_topic(CHAT), data=b"x", sent=1) == []


def test_a_subscription_younger_than_the_envelope_does_not_receive_it() -> None:
    index = TopicIndex(
        [
            sub("old", CHAT),
            Subscription("new", "/waku/2/rs/1/0", (CHAT,), (content_topic_to_v1_topic(CHAT),), 50.0),
        ]
    )
    got = receptions(index, topic=content_topic_to_v1_topic(CHAT), data=b"x", sent=1, received_at=10.0)
    assert [r.subscription_id for r in got] == ["old"]
    unknown = receptions(index, topic=content_topic_to_v1_topic(CHAT), data=b"x", sent=1)
    assert [r.subscription_id for r in unknown] == ["old", "new"]  # arrival time unknown: every subscription
