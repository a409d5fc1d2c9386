"""Errors of the Messaging API vocabulary; each carries the exact text MESSAGING-API shows to clients."""

from __future__ import annotations

__all__ = ["MessagingError", "UnsupportedCluster", "UnsupportedPubsubTopic"]


class MessagingError(Exception):
    """Base class of :mod:`msgapi` errors."""


class UnsupportedPubsubTopic(MessagingError):
    """A pubsub topic this node does not serve (MESSAGING-API "send": "MUST throw an error if the
    ``pubsubTopic`` ... is not supported"); ``str()`` is the spec's REST 404 text for a send."""

    def __init__(self, pubsub_topic: str) -> None:
        self.pubsub_topic = pubsub_topic
        super().__init__(f"Failed to send message. Target pubsubTopic '{pubsub_topic}' not supported.")


class UnsupportedCluster(MessagingError):
    """A subscription on a cluster this node is not part of; ``str()`` is the spec's REST 404 text for
    ``POST /subscribe`` (MESSAGING-API "Subscribe", REST API)."""

    def __init__(self, cluster_id: int | None, pubsub_topic: str) -> None:
        self.cluster_id = cluster_id
        self.pubsub_topic = pubsub_topic
        shown = "unknown" if cluster_id is None else str(cluster_id)
        super().__init__(f"Cannot create subscription. clusterId {shown} is not supported.")
