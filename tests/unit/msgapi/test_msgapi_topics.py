"""Pubsub topics a node serves, and the spec's refusal texts (MESSAGING-API "Send", "Subscribe" REST 404s)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from msgapi.errors import UnsupportedCluster, UnsupportedPubsubTopic
from msgapi.topics import MAX_SHARD, ShardedTopic, TopicPolicy, shard_topic

POLICY = TopicPolicy(cluster_id=16, shards=(32, 64))


def test_served_topics_and_default_in_configuration_order() -> None:
    assert POLICY.topics == ("/waku/2/rs/16/32", "/waku/2/rs/16/64")
    assert POLICY.default_topic == "/waku/2/rs/16/32"


def test_empty_topic_means_the_default_for_send_and_subscribe() -> None:
    assert POLICY.for_send("") == "/waku/2/rs/16/32"
    assert POLICY.for_subscribe("") == "/waku/2/rs/16/32"


def test_served_topic_is_accepted_as_given() -> None:
    assert POLICY.for_send("/waku/2/rs/16/64") == "/waku/2/rs/16/64"
    assert POLICY.for_subscribe("/waku/2/rs/16/64") == "/waku/2/rs/16/64"


@pytest.mark.parametrize(
    "topic",
    ["string", "/waku/2/rs/16/33", "/waku/2/rs/1/32", "/waku/2/rs/16/032", "/waku/2/default-waku/proto"],
)
def test_send_refuses_with_the_spec_text(topic: str) -> None:
    with pytest.raises(UnsupportedPubsubTopic) as err:
        POLICY.for_send(topic)
    assert str(err.value) == f"Failed to send message. Target pubsubTopic '{topic}' not supported."
    assert err.value.pubsub_topic == topic


def test_subscribe_on_another_cluster_gets_the_spec_cluster_text() -> None:
    with pytest.raises(UnsupportedCluster) as err:
        POLICY.for_subscribe("/waku/2/rs/0/2")
    assert str(err.value) == "Cannot create subscription. clusterId 0 is not supported."
    assert err.value.cluster_id == 0


def test_subscribe_on_a_topic_naming_no_cluster_says_so() -> None:
    with pytest.raises(UnsupportedCluster) as err:
        POLICY.for_subscribe("/waku/2/default-waku/proto")
    assert str(err.value) == "Cannot create subscription. clusterId unknown is not supported."


def test_subscribe_on_an_unserved_shard_of_our_cluster_is_a_topic_refusal() -> None:
    with pytest.raises(UnsupportedPubsubTopic):
        POLICY.for_subscribe("/waku/2/rs/16/1")


@pytest.mark.parametrize(
    "text", ["/waku/2/rs/65536/0", "/waku/2/rs/0/99999", "/waku/2/rs/-1/0", "/waku/2/rs/0"]
)
def test_out_of_range_or_malformed_topics_do_not_parse(text: str) -> None:
    assert ShardedTopic.parse(text) is None


@given(st.integers(0, MAX_SHARD), st.integers(0, MAX_SHARD))
def test_shard_topic_round_trips(cluster: int, shard: int) -> None:
    assert ShardedTopic.parse(shard_topic(cluster, shard)) == ShardedTopic(cluster, shard)


def test_a_policy_needs_a_shard() -> None:
    with pytest.raises(ValueError, match="at least one shard"):
        TopicPolicy(cluster_id=1, shards=())
