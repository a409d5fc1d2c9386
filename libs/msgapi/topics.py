"""Static-sharding pubsub topics and which of them a node serves.

RELAY-SHARDING (static sharding) names a shard's pubsub topic ``/waku/2/rs/<cluster>/<shard>``, both decimal,
cluster and shard in 0..65535. A node configured with ``clusterId`` and ``shards`` (MESSAGING-API "Initial
configuration") serves exactly those topics; the first configured shard's topic is the default for requests
that leave ``pubsubTopic`` empty (an Encoder "SHOULD" supply it; our gRPC/REST callers may omit it).

Over Waku v1 the pubsub topic is not carried by the envelope: it only scopes the API (which requests are
accepted) and enters the 14/WAKU2-MESSAGE hash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from msgapi.errors import UnsupportedCluster, UnsupportedPubsubTopic

__all__ = ["MAX_SHARD", "ShardedTopic", "TopicPolicy", "shard_topic"]

MAX_SHARD = 65_535  # RELAY-SHARDING: cluster and shard indices are uint16
_TOPIC = re.compile(r"^/waku/2/rs/(0|[1-9][0-9]{0,4})/(0|[1-9][0-9]{0,4})$")


def shard_topic(cluster_id: int, shard: int) -> str:
    """The static-sharding pubsub topic of ``shard`` in ``cluster_id``."""
    if not (0 <= cluster_id <= MAX_SHARD and 0 <= shard <= MAX_SHARD):
        raise ValueError(f"cluster and shard must be in 0..{MAX_SHARD}")
    return f"/waku/2/rs/{cluster_id}/{shard}"


@dataclass(frozen=True, slots=True)
class ShardedTopic:
    """A parsed ``/waku/2/rs/<cluster>/<shard>`` topic."""

    cluster_id: int
    shard: int

    @classmethod
    def parse(cls, text: str) -> ShardedTopic | None:
        """The parsed topic, or None when ``text`` is not a canonical static-sharding topic."""
        m = _TOPIC.match(text)
        if m is None:
            return None
        cluster, shard = int(m.group(1)), int(m.group(2))
        if cluster > MAX_SHARD or shard > MAX_SHARD:
            return None
        return cls(cluster, shard)


@dataclass(frozen=True, slots=True)
class TopicPolicy:
    """The pubsub topics a node serves: one cluster, some shards."""

    cluster_id: int
    shards: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.shards:
            raise ValueError("a node serves at least one shard")

    @property
    def topics(self) -> tuple[str, ...]:
        """Every served pubsub topic, in configuration order."""
        return tuple(shard_topic(self.cluster_id, s) for s in self.shards)

    @property
    def default_topic(self) -> str:
        """The topic of the first configured shard: used when a request leaves the pubsub topic empty."""
        return shard_topic(self.cluster_id, self.shards[0])

    def for_send(self, pubsub_topic: str) -> str:
        """The topic a send request goes to (empty = default).

        Raises :class:`UnsupportedPubsubTopic` for a topic this node does not serve.
        """
        if not pubsub_topic:
            return self.default_topic
        parsed = ShardedTopic.parse(pubsub_topic)
        if parsed is None or parsed.cluster_id != self.cluster_id or parsed.shard not in self.shards:
            raise UnsupportedPubsubTopic(pubsub_topic)
        return pubsub_topic

    def for_subscribe(self, pubsub_topic: str) -> str:
        """The topic a subscription listens on (empty = default).

        A topic of another cluster (or one that names no cluster at all) raises :class:`UnsupportedCluster`,
        whose text is the spec's subscribe 404; a served cluster's unserved shard raises
        :class:`UnsupportedPubsubTopic`.
        """
        if not pubsub_topic:
            return self.default_topic
        parsed = ShardedTopic.parse(pubsub_topic)
        if parsed is None:
            raise UnsupportedCluster(None, pubsub_topic)
        if parsed.cluster_id != self.cluster_id:
            raise UnsupportedCluster(parsed.cluster_id, pubsub_topic)
        if parsed.shard not in self.shards:
            raise UnsupportedPubsubTopic(pubsub_topic)
        return pubsub_topic
