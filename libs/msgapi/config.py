"""The Messaging API's initial configuration (MESSAGING-API "Initial configuration"): ``MSGAPI_*``.

The spec supplies this configuration "at node creation time"; Mailmesh's node is several services, and the
send and subscription services (and, later, the gateway) each embed :class:`MessagingConfig` with
``meshcore.config.nested`` so they read the same variables and can never disagree on which pubsub topics are
served or which content topics are monitored.

Choices where the spec leaves room:

- ``mode``: only ``relay`` is served — Mailmesh publishes through its own edge peers (RELAY over Waku v1).
  ``edge`` (LIGHTPUSH + FILTER through service nodes) is refused at start-up with a message that says so,
  rather than accepted and silently behaving like relay.
- ``clusterId`` / ``shards`` default to The Waku Network (cluster 1, shards 0-7; RELAY-SHARDING static
  sharding); the spec makes both mandatory, a default keeps ``make run`` a single command.
- ``storeNodes`` / ``bootstrapNodes`` are enode URLs of Waku v1 nodes (the spec's multiaddrs belong to Waku
  v2): store nodes are asked over the mailserver protocol (WAKU-MAILSERVER) whether they hold a sent envelope;
  without any, the mesh's own archive is the store.
"""

from __future__ import annotations

from dataclasses import dataclass

from devp2p.enode import parse_enode
from meshcore.config import FromEnv, setting
from meshcore.parsers import parse_bool, parse_choice, parse_duration, parse_int, parse_list
from msgapi.topics import MAX_SHARD, TopicPolicy
from wakucodec.contenttopic import ContentTopic
from wakucodec.errors import InvalidTopic

__all__ = ["RESERVED_SUBSCRIPTION_ID", "MessagingConfig", "parse_content_topic", "parse_enode_url"]

#: The background confirmation subscription's id (MESSAGING-API "Acknowledgements").
RESERVED_SUBSCRIPTION_ID = "1692854c-cbde-4afe-901f-1c86ecbd9ea1"

_EDGE_REFUSED = (
    "MSGAPI_MODE=edge is not supported: Mailmesh is a relay node (it publishes through its own edge peers "
    "over Waku v1 and has no LIGHTPUSH or FILTER service nodes to lean on); set MSGAPI_MODE=relay"
)


def parse_enode_url(raw: str) -> str:
    """An enode URL, checked (``enode://<128 hex>@host:port``) and returned as given."""
    text = raw.strip()
    parse_enode(text)  # InvalidEnode is a ValueError: reported with the variable's name
    return text


def parse_content_topic(raw: str) -> str:
    """A 23/WAKU2-TOPICS content topic, checked and returned in its canonical spelling."""
    try:
        return str(ContentTopic.parse(raw.strip()))
    except InvalidTopic as err:
        raise ValueError(str(err)) from None


@dataclass(frozen=True, kw_only=True)
class MessagingConfig(FromEnv):
    """The node-wide Messaging API settings every Messaging API service reads."""

    mode: str = setting(
        "MSGAPI_MODE",
        parse_choice("relay", "edge"),
        default="relay",
        doc="Messaging API mode (spec `mode`): relay (publish through the edge peers). edge is refused.",
    )
    cluster_id: int = setting(
        "MSGAPI_CLUSTER_ID",
        parse_int(0, MAX_SHARD),
        default="1",
        doc="Spec `clusterId` (RELAY-SHARDING); 1 = The Waku Network.",
    )
    shards: tuple[int, ...] = setting(
        "MSGAPI_SHARDS",
        parse_list(parse_int(0, MAX_SHARD)),
        default="0,1,2,3,4,5,6,7",
        doc="Spec `shards`: served pubsub topics are /waku/2/rs/<cluster>/<shard>; the first is the default "
        "for requests without a pubsub topic.",
    )
    store_nodes: tuple[str, ...] = setting(
        "MSGAPI_STORE_NODES",
        parse_list(parse_enode_url),
        default="",
        doc="Spec `storeNodes`: enode URLs of Waku v1 mailservers asked whether they hold a sent message; "
        "empty = the mesh's own archive is the store.",
    )
    bootstrap_nodes: tuple[str, ...] = setting(
        "MSGAPI_BOOTSTRAP_NODES",
        parse_list(parse_enode_url),
        default="",
        doc="Spec `bootstrapNodes`: enode URLs the edge peers are asked to keep connected (static peers).",
    )
    store_confirmation: bool = setting(
        "MSGAPI_STORE_CONFIRMATION",
        parse_bool(),
        default="false",
        doc="Spec `storeConfirmation`: track `stored` with a recurring store check (and retry sends the "
        "store does not hold).",
    )
    filter_confirmation: bool = setting(
        "MSGAPI_FILTER_CONFIRMATION",
        parse_bool(),
        default="true",
        doc="Spec `filterConfirmation`: listen for `confirmContentTopics` to set `received`.",
    )
    confirm_content_topics: tuple[str, ...] = setting(
        "MSGAPI_CONFIRM_CONTENT_TOPICS",
        parse_list(parse_content_topic),
        default="",
        doc="Spec `confirmContentTopics`: content topics monitored from start-up under the reserved "
        f"subscription {RESERVED_SUBSCRIPTION_ID}.",
    )
    store_check_interval_s: float = setting(
        "MSGAPI_STORE_CHECK_INTERVAL_SECONDS",
        parse_duration(0.05, 86_400),
        default="60",
        doc="Seconds between two recurring store checks (spec: SHOULD be 60).",
    )

    def __post_init__(self) -> None:
        problems = []
        if self.mode == "edge":
            problems.append(_EDGE_REFUSED)
        if not self.shards:
            problems.append("MSGAPI_SHARDS must list at least one shard")
        elif len(set(self.shards)) != len(self.shards):
            problems.append("MSGAPI_SHARDS lists a shard twice")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def topics(self) -> TopicPolicy:
        """The served pubsub topics."""
        return TopicPolicy(self.cluster_id, self.shards)

    @property
    def background_subscription(self) -> bool:
        """Whether the reserved background subscription runs from start-up.

        MESSAGING-API "Acknowledgements": store or filter confirmation on, and confirmContentTopics given.
        """
        return bool(self.confirm_content_topics) and (self.store_confirmation or self.filter_confirmation)
