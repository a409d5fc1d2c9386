"""Every environment variable of the health service (``HEALTH_`` prefix), with defaults and docs.

Targets are lists of instances, never one load-balanced channel: the health service counts the Waku peers
of each edge-peer instance and checks each replica of a service, so it must know which instance answered.
An item is one instance (``host:port``) or ``dns:///name:port``, which stands for every address the name
resolves to, re-resolved every ``HEALTH_DISCOVERY_INTERVAL_SECONDS`` (:mod:`meshcore.discovery`; in
Kubernetes a headless Service, which lists each ready pod). Locally the defaults are the ports of
``make run`` (README "Services and ports").
"""

from __future__ import annotations

from dataclasses import dataclass

from meshcore import FromEnv, RuntimeConfig, runtime_settings, setting
from meshcore.discovery import DEFAULT_INTERVAL_S, parse_instance_targets
from meshcore.parsers import Parser, parse_duration, parse_int

__all__ = ["Config"]


_targets: Parser[tuple[str, ...]] = parse_instance_targets


@dataclass(frozen=True, kw_only=True)
class Config(FromEnv):
    """Health service settings; ``describe_markdown(Config)`` renders the README table."""

    runtime: RuntimeConfig = runtime_settings(
        "HEALTH", service_name="health", grpc_port=50057, metrics_port=9157
    )
    edge_peer_addrs: tuple[str, ...] = setting(
        "HEALTH_EDGE_ADDR",
        _targets,
        default="127.0.0.1:50051",
        doc="Edge-peer instances (mailmesh.edgepeer.v1.EdgePeerService), comma-separated host:port or "
        "dns:///name:port (each address it resolves to); their distinct Waku peers make the peer count. "
        "At least one.",
    )
    archive_addrs: tuple[str, ...] = setting(
        "HEALTH_ARCHIVE_ADDR",
        _targets,
        default="127.0.0.1:50053",
        doc="Archive replicas, comma-separated host:port or dns:///name:port (each address it resolves to); "
        "the node is Unhealthy unless at least one answers grpc.health.v1 SERVING for "
        "mailmesh.archive.v1.ArchiveService. At least one.",
    )
    ingest_addrs: tuple[str, ...] = setting(
        "HEALTH_INGEST_ADDR",
        _targets,
        default="127.0.0.1:50052",
        doc="Ingest replicas whose grpc.health.v1 status is reported (information only); empty = none.",
    )
    history_addrs: tuple[str, ...] = setting(
        "HEALTH_HISTORY_ADDR",
        _targets,
        default="127.0.0.1:50054",
        doc="history-query replicas whose grpc.health.v1 status is reported (information only); "
        "empty = none.",
    )
    send_addrs: tuple[str, ...] = setting(
        "HEALTH_SEND_ADDR",
        _targets,
        default="127.0.0.1:50055",
        doc="Send replicas whose grpc.health.v1 status is reported (information only); empty = none.",
    )
    subscription_addrs: tuple[str, ...] = setting(
        "HEALTH_SUBSCRIPTION_ADDR",
        _targets,
        default="127.0.0.1:50056",
        doc="Subscription replicas whose grpc.health.v1 status is reported (information only); empty = none.",
    )
    gateway_addrs: tuple[str, ...] = setting(
        "HEALTH_GATEWAY_ADDR",
        _targets,
        default="127.0.0.1:50058",
        doc='Gateway replicas (their gRPC port, which serves grpc.health.v1 only: the whole server, "", is '
        "asked) whose status is reported (information only); empty = none.",
    )
    discovery_interval_s: float = setting(
        "HEALTH_DISCOVERY_INTERVAL_SECONDS",
        parse_duration(1, 3600),
        default=f"{DEFAULT_INTERVAL_S:g}",
        doc="A dns:///name:port target is resolved again this often: a new replica is checked, a removed "
        "one dropped, within this time.",
    )
    minimally_healthy_peers: int = setting(
        "HEALTH_MINIMALLY_HEALTHY_PEERS",
        parse_int(1, 10_000),
        default="4",
        doc="Distinct Waku peers needed for MinimallyHealthy "
        '(MESSAGING-API "Health Indicator": at least four).',
    )
    healthy_peers: int = setting(
        "HEALTH_HEALTHY_PEERS",
        parse_int(1, 10_000),
        default="6",
        doc='Distinct Waku peers needed for Healthy (MESSAGING-API "Health Indicator": at least six); '
        ">= HEALTH_MINIMALLY_HEALTHY_PEERS.",
    )
    hold_s: float = setting(
        "HEALTH_HOLD_SECONDS",
        parse_duration(0, 3600),
        default="3",
        doc="Seconds an evaluated change must hold in every evaluation before the status follows it "
        "(upgrades, and downgrades that keep some peer and the archive); 0 = no hysteresis.",
    )
    loss_hold_s: float = setting(
        "HEALTH_LOSS_HOLD_SECONDS",
        parse_duration(0, 3600),
        default="0",
        doc="The same for a loss (no Waku peer on any edge peer, or no archive SERVING) -> Unhealthy; "
        "0 = the first evaluation that sees it. <= HEALTH_HOLD_SECONDS.",
    )
    poll_interval_s: float = setting(
        "HEALTH_POLL_INTERVAL_SECONDS",
        parse_duration(0.01, 600),
        default="1",
        doc="Seconds between evaluations (every edge peer and service is queried once per evaluation).",
    )
    call_timeout_s: float = setting(
        "HEALTH_CALL_TIMEOUT_SECONDS",
        parse_duration(0.01, 600),
        default="0.5",
        doc="Deadline of each NodeInfo, ListPeers and grpc.health.v1 Check call, seconds; a target that does "
        "not answer in time counts as unreachable for that evaluation.",
    )
    watch_min_interval_s: float = setting(
        "HEALTH_WATCH_MIN_INTERVAL_SECONDS",
        parse_duration(0, 600),
        default="1",
        doc="WatchHealth in WATCH_MODE_ANY: least seconds between two reports that do not change the status "
        "(status changes are always sent at once).",
    )

    def __post_init__(self) -> None:
        problems = []
        if self.healthy_peers < self.minimally_healthy_peers:
            problems.append("HEALTH_HEALTHY_PEERS must be >= HEALTH_MINIMALLY_HEALTHY_PEERS")
        if self.loss_hold_s > self.hold_s:
            problems.append(
                "HEALTH_LOSS_HOLD_SECONDS must be <= HEALTH_HOLD_SECONDS (losses are never slower)"
            )
        if not self.edge_peer_addrs:
            problems.append("HEALTH_EDGE_ADDR must list at least one edge peer")
        if not self.archive_addrs:
            problems.append("HEALTH_ARCHIVE_ADDR must list at least one archive")
        if problems:
            raise ValueError("; ".join(problems))
