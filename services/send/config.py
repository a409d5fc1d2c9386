"""Every environment variable of the send service (``SEND_`` prefix), with defaults and docs.

The Messaging API's node-wide settings (``MSGAPI_*``: served pubsub topics, store confirmation, monitored
content topics) and the store (``MSGSTORE_*``, shared with the subscription service) are embedded with
``nested`` so every Messaging API service reads the same variables.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshcore import FromEnv, RuntimeConfig, nested, runtime_settings, setting
from meshcore.parsers import (
    Parser,
    parse_duration,
    parse_float,
    parse_grpc_target,
    parse_host_port,
    parse_int,
    parse_targets,
)
from msgapi.config import MessagingConfig
from msgstore.config import StoreConfig

__all__ = ["Config"]


_targets: Parser[tuple[str, ...]] = parse_targets


@dataclass(frozen=True, kw_only=True)
class Config(FromEnv):
    """Send service settings; ``describe_markdown(Config)`` renders the README table."""

    runtime: RuntimeConfig = runtime_settings("SEND", service_name="send", grpc_port=50055, metrics_port=9155)
    messaging: MessagingConfig = nested(MessagingConfig, prefix="MSGAPI")
    store: StoreConfig = nested(StoreConfig, prefix="MSGSTORE")
    edge_peer_addrs: tuple[str, ...] = setting(
        "SEND_EDGE_ADDR",
        _targets,
        default="127.0.0.1:50051",
        doc="Edge-peer instances (mailmesh.edgepeer.v1.EdgePeerService), comma-separated host:port; every "
        "attempt publishes through each of them. At least one.",
    )
    history_addr: str = setting(
        "SEND_HISTORY_ADDR",
        parse_grpc_target,
        default="127.0.0.1:50054",
        doc="history-query (HistoryQueryService.Lookup): asked whether the archive holds a sent envelope; "
        "host:port, replicas ip:port,ip:port or a gRPC target (dns:///name:port), balanced round-robin.",
    )
    health_addr: str = setting(
        "SEND_HEALTH_ADDR",
        lambda raw: "" if not raw.strip() else parse_grpc_target(raw),
        default="127.0.0.1:50057",
        doc="Health service (HealthService.WatchHealth): attempts pause while the node is Unhealthy; "
        "empty = never pause. Replicas as for SEND_HISTORY_ADDR (each reconnect picks the next).",
    )
    subscription_addr: str = setting(
        "SEND_SUBSCRIPTION_ADDR",
        lambda raw: "" if not raw.strip() else parse_grpc_target(raw),
        default="127.0.0.1:50056",
        doc="Subscription service (SubscriptionService.ListSubscriptions): with MSGAPI_STORE_CONFIRMATION, a "
        "content topic an active subscription covers is store-confirmed too; empty = only "
        "MSGAPI_CONFIRM_CONTENT_TOPICS are. Replicas as for SEND_HISTORY_ADDR.",
    )
    subscription_refresh_s: float = setting(
        "SEND_SUBSCRIPTION_REFRESH_SECONDS",
        parse_duration(0.05, 600),
        default="2",
        doc="Seconds between two reads of the active subscriptions (a Send uses the last list read).",
    )
    retries: int = setting(
        "SEND_RETRIES",
        parse_int(0, 10),
        default="3",
        doc='Retries after the first attempt (msg-api "Retry": 3).',
    )
    backoff_s: float = setting(
        "SEND_BACKOFF_SECONDS",
        parse_duration(0.001, 60),
        default="1",
        doc='Delay before the first retry; each further retry doubles it (msg-api "Retry": 1 s, 2 s, 4 s).',
    )
    store_check_delay_s: float = setting(
        "SEND_STORE_CHECK_DELAY_SECONDS",
        parse_duration(0, 60),
        default="0.5",
        doc="Seconds after a successful publish before the store (the archive, or MSGAPI_STORE_NODES) is "
        "asked whether it holds the envelope (relay -> ingest -> archive takes a batch interval).",
    )
    publish_timeout_s: float = setting(
        "SEND_PUBLISH_TIMEOUT_SECONDS",
        parse_duration(0.05, 30),
        default="1",
        doc="EdgePeerService.Publish relay_timeout: how long an edge peer waits for its Waku peers to take "
        "the envelope before it reports NO_PEERS.",
    )
    call_timeout_s: float = setting(
        "SEND_CALL_TIMEOUT_SECONDS",
        parse_duration(0.05, 60),
        default="5",
        doc="Deadline of Lookup, ListPeers and NodeInfo calls (Publish gets its relay timeout on top).",
    )
    max_pow: float = setting(
        "SEND_MAX_POW",
        parse_float(0, 100),
        default="1",
        doc="Highest PoW the service seals to, whatever the edge peers' Waku peers require.",
    )
    seal_work_time_s: float = setting(
        "SEND_SEAL_WORK_TIME_SECONDS",
        parse_duration(0.01, 30),
        default="2",
        doc="Most seconds spent mining one envelope's nonce (Go Envelope.Seal WorkTime).",
    )
    default_ttl_s: int = setting(
        "SEND_DEFAULT_TTL_SECONDS",
        parse_int(10, 86_400),
        default="120",
        doc="Envelope TTL when a request gives none (status-go WakuTTL: 120 s).",
    )
    max_in_flight: int = setting(
        "SEND_MAX_IN_FLIGHT",
        parse_int(1, 10_000),
        default="64",
        doc="Attempts (seal + publish) run concurrently at most.",
    )
    lease_ttl_s: float = setting(
        "SEND_LEASE_TTL_SECONDS",
        parse_duration(1, 600),
        default="10",
        doc="Lifetime of an outbox shard lease; a dead replica's shards are taken over within it. Renewed "
        "every third of it.",
    )
    adopt_interval_s: float = setting(
        "SEND_ADOPT_INTERVAL_SECONDS",
        parse_duration(0.05, 600),
        default="1",
        doc="Seconds between two reads of an owned shard's open requests (picks up requests another "
        "replica accepted).",
    )
    advertise_addr: str = setting(
        "SEND_ADVERTISE_ADDR",
        lambda raw: "" if not raw.strip() else str(parse_host_port()(raw)),
        default="",
        doc="host:port the other send replicas reach this one's gRPC server at (Cancel/Resend of a request "
        "this replica owns are forwarded here); empty = SEND_GRPC_HOST, or this host's address when that is "
        "a wildcard, with the bound gRPC port. In Kubernetes: the pod IP.",
    )
    watch_poll_s: float = setting(
        "SEND_WATCH_POLL_SECONDS",
        parse_duration(0.01, 60),
        default="0.2",
        doc="WatchSendStatuses: seconds between two reads of the change log when nothing woke the stream "
        "(changes written by this replica wake it at once).",
    )

    def __post_init__(self) -> None:
        problems = []
        if not self.edge_peer_addrs:
            problems.append("SEND_EDGE_ADDR must list at least one edge peer")
        # A lease is renewed once a third of its TTL has passed, and msgstore refuses writes within the
        # safety margin of its expiry: two thirds of the TTL must stay clear of the margin.
        if self.lease_ttl_s < 3 * self.store.lease_margin_s:
            problems.append(
                "SEND_LEASE_TTL_SECONDS must be at least 3 x MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS "
                f"({self.lease_ttl_s:g} < 3 x {self.store.lease_margin_s:g})"
            )
        if problems:
            raise ValueError("; ".join(problems))
