"""Every environment variable of the subscription service (``SUBSCRIPTION_`` prefix), with defaults and docs.

The Messaging API's node-wide settings (``MSGAPI_*``, :class:`msgapi.config.MessagingConfig`) and the store
(``MSGSTORE_*``, :class:`msgstore.config.StoreConfig`) are embedded with their shared prefixes, so this
service and the send service read the same variables and can never disagree on the served pubsub topics,
the monitored content topics or where the records live.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from meshcore import FromEnv, RuntimeConfig, runtime_settings, setting
from meshcore.config import nested
from meshcore.discovery import DEFAULT_INTERVAL_S, parse_instance_targets
from meshcore.parsers import (
    Parser,
    is_grpc_uri,
    parse_duration,
    parse_grpc_target,
    parse_int,
    parse_str,
    parse_targets,
)
from msgapi.config import MessagingConfig
from msgstore.config import PREFIX as STORE_PREFIX
from msgstore.config import StoreConfig

__all__ = ["Config"]


_targets: Parser[tuple[str, ...]] = parse_targets


def _optional_instances(raw: str) -> tuple[str, ...]:
    """Instances (host:port, or dns:///name:port for each address), or () for an empty value (the default
    applies) and ("none",) to turn the feed off."""
    value = raw.strip()
    if not value:
        return ()
    if value.lower() == "none":
        return ("none",)
    return parse_instance_targets(value)


def _optional_target(raw: str) -> str:
    """One service's target (replicas balanced), or "" for an empty value."""
    return "" if not raw.strip() else parse_grpc_target(raw)


@dataclass(frozen=True, kw_only=True)
class Config(FromEnv):
    """Subscription service settings; ``describe_markdown(Config)`` renders the README table."""

    runtime: RuntimeConfig = runtime_settings(
        "SUBSCRIPTION", service_name="subscription", grpc_port=50056, metrics_port=9156
    )
    messaging: MessagingConfig = nested(MessagingConfig, prefix="MSGAPI")
    store: StoreConfig = nested(StoreConfig, prefix=STORE_PREFIX)
    edge_peer_addrs: tuple[str, ...] = setting(
        "SUBSCRIPTION_EDGE_ADDR",
        _targets,
        default="127.0.0.1:50051",
        doc="Edge-peer instances (EdgePeerService.StreamEnvelopes), comma-separated host:port: each one's "
        "live feed is followed, since a Waku peer may be connected to any of them. At least one.",
    )
    history_addr: str = setting(
        "SUBSCRIPTION_HISTORY_ADDR",
        _optional_target,
        default="127.0.0.1:50054",
        doc="history-query (HistoryQueryService.Lookup) for the recurring stored check: host:port, replicas "
        "ip:port,ip:port or a gRPC target (dns:///name:port), balanced round-robin.",
    )
    history_served_addrs: tuple[str, ...] = setting(
        "SUBSCRIPTION_HISTORY_SERVED_ADDRS",
        _optional_instances,
        default="",
        doc="history-query instances whose served Query results are followed (HistoryQueryService."
        "WatchServed: records of served envelopes become stored), comma-separated host:port or "
        "dns:///name:port (every address it resolves to); empty = the instances of "
        "SUBSCRIPTION_HISTORY_ADDR; 'none' = not followed. Each instance serves its own queries, so all "
        "are followed.",
    )
    discovery_interval_s: float = setting(
        "SUBSCRIPTION_DISCOVERY_INTERVAL_SECONDS",
        parse_duration(1, 3600),
        default=f"{DEFAULT_INTERVAL_S:g}",
        doc="A dns:///name:port history-query target is resolved again this often: a new instance is "
        "followed, a removed one dropped, within this time.",
    )
    health_addr: str = setting(
        "SUBSCRIPTION_HEALTH_ADDR",
        _optional_target,
        default="127.0.0.1:50057",
        doc="The health service (HealthService.WatchHealth): health:change events, and the stored check "
        "halts while Unhealthy.",
    )
    send_addr: str = setting(
        "SUBSCRIPTION_SEND_ADDR",
        _optional_target,
        default="",
        doc="The send service (SendService.WatchSendStatuses): merges sending/sent/stored/error of sent "
        "messages into their records; empty = not followed (no send service in this mesh).",
    )
    replica_id: str = setting(
        "SUBSCRIPTION_REPLICA_ID",
        parse_str(),
        default="",
        doc="This replica's name in the records/writer lease; empty = host name and process id.",
    )
    writer_lease_s: float = setting(
        "SUBSCRIPTION_WRITER_LEASE_SECONDS",
        parse_duration(1, 600),
        default="10",
        doc="TTL of the records/writer lease: a dead writer's replica is replaced within this time. "
        "Renewed every third of it; larger than 3 x MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS.",
    )
    tail_interval_s: float = setting(
        "SUBSCRIPTION_TAIL_INTERVAL_SECONDS",
        parse_duration(0.01, 60),
        default="0.2",
        doc="Replicas that are not the writer read new events from the store this often (live streams).",
    )
    consumer_buffer: int = setting(
        "SUBSCRIPTION_CONSUMER_BUFFER",
        parse_int(16, 1_000_000),
        default="4096",
        doc="Events a StreamEvents consumer may have unread before its stream ends with RESOURCE_EXHAUSTED "
        "(SLOW_CONSUMER); it resumes after its last sequence.",
    )
    maintain_interval_s: float = setting(
        "SUBSCRIPTION_MAINTAIN_INTERVAL_SECONDS",
        parse_duration(1, 86_400),
        default="300",
        doc="The writer removes rows past their retention this often (SQLite; Cassandra's rows carry TTLs).",
    )
    call_timeout_s: float = setting(
        "SUBSCRIPTION_CALL_TIMEOUT_SECONDS",
        parse_duration(0.05, 600),
        default="5",
        doc="Deadline of unary calls to other services (Lookup), seconds.",
    )

    @property
    def served_targets(self) -> tuple[str, ...]:
        """The history-query instances whose WatchServed is followed: SUBSCRIPTION_HISTORY_SERVED_ADDRS, else
        each replica SUBSCRIPTION_HISTORY_ADDR lists (each serves its own queries) — a ``dns:`` name stands
        for every address it resolves to (meshcore.discovery)."""
        if self.history_served_addrs == ("none",):
            return ()
        if self.history_served_addrs:
            return self.history_served_addrs
        addr = self.history_addr
        if not addr:
            return ()
        if addr.startswith(("ipv4:", "ipv6:")):  # gRPC's multi-address form: each address an instance
            return tuple(addr.split(":", 1)[1].split(","))
        if is_grpc_uri(addr):  # dns: every address it resolves to; unix: the one instance
            return (addr,)
        return tuple(addr.split(","))

    @property
    def replica(self) -> str:
        """The lease owner name: SUBSCRIPTION_REPLICA_ID, or host name and process id."""
        return self.replica_id or f"{socket.gethostname()}-{os.getpid()}"

    def __post_init__(self) -> None:
        problems = []
        if not self.edge_peer_addrs:
            problems.append("SUBSCRIPTION_EDGE_ADDR must list at least one edge peer")
        if self.writer_lease_s <= 3 * self.store.lease_margin_s:
            problems.append(
                "SUBSCRIPTION_WRITER_LEASE_SECONDS must exceed 3 x MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS "
                "(the writer renews every third of it and stops a margin before expiry)"
            )
        if problems:
            raise ValueError("; ".join(problems))
