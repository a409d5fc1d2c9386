"""The health service from its config: clients and monitor (:func:`connect`), then the server (:func:`build`).

Shutdown (meshcore's sequence, SIGTERM): grpc.health.v1 goes NOT_SERVING; the watch streams end with
UNAVAILABLE (they never end on their own and would otherwise hold the server for its whole grace) and the
evaluation loop stops; in-flight GetHealth calls finish; then the channels close.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.health.v1 import health_pb2_grpc
from meshcore import MeshServer, Registration, build_server
from meshcore.server import ShutdownHook
from services.health.clients import GRPC_SERVICES, Channels, EdgePeerClient, HealthCheckClient
from services.health.config import Config
from services.health.logic import Thresholds
from services.health.metrics import HealthMetrics
from services.health.monitor import HealthMonitor, ServiceTarget
from services.health.servicer import SERVICE_NAME, HealthServicer
from services.health.watch import WatchHub

__all__ = ["Deps", "build", "connect", "service_targets", "thresholds_from"]


@dataclass(frozen=True)
class Deps:
    """What the server needs besides its config."""

    monitor: HealthMonitor
    """The health monitor (its evaluation loop started by :func:`connect`, or by the test)."""
    closers: Sequence[ShutdownHook] = ()
    """Run after the drain, in order (e.g. close the channels)."""
    registry: CollectorRegistry = REGISTRY
    """Where the gRPC and domain metrics live."""
    tracer_provider: trace.TracerProvider | None = field(default=None)
    """None = the global one."""


def thresholds_from(cfg: Config) -> Thresholds:
    """The thresholds and dwell times the config describes."""
    return Thresholds(
        minimally_healthy_peers=cfg.minimally_healthy_peers,
        healthy_peers=cfg.healthy_peers,
        hold_s=cfg.hold_s,
        loss_hold_s=cfg.loss_hold_s,
    )


def service_targets(cfg: Config, channels: Channels) -> list[ServiceTarget]:
    """Every replica whose grpc.health.v1 status is checked: the archive (affects the status), then the others
    for information, edge peers included."""
    by_service = (
        ("archive", cfg.archive_addrs),
        ("edge-peer", cfg.edge_peer_addrs),
        ("ingest", cfg.ingest_addrs),
        ("history-query", cfg.history_addrs),
        ("send", cfg.send_addrs),
        ("subscription", cfg.subscription_addrs),
        ("gateway", cfg.gateway_addrs),
    )
    return [
        ServiceTarget(name, GRPC_SERVICES[name], HealthCheckClient(channels, target), name == "archive")
        for name, targets in by_service
        for target in targets
    ]


def connect(
    cfg: Config,
    *,
    registry: CollectorRegistry = REGISTRY,
    tracer_provider: trace.TracerProvider | None = None,
    clock: Callable[[], float] = time.time,
    start: bool = True,
) -> Deps:
    """Open the channels and build the monitor; ``start`` begins evaluating (call from the event loop)."""
    channels = Channels(timeout_s=cfg.call_timeout_s, registry=registry, tracer_provider=tracer_provider)
    metrics = HealthMetrics.for_registry(registry)
    hub = WatchHub(min_interval_s=cfg.watch_min_interval_s)
    metrics.follow_watchers(hub)
    monitor = HealthMonitor(
        [EdgePeerClient(channels, target) for target in cfg.edge_peer_addrs],
        service_targets(cfg, channels),
        thresholds_from(cfg),
        hub=hub,
        observer=metrics,
        clock=clock,
    )
    if start:
        monitor.start(cfg.poll_interval_s)
    return Deps(monitor, closers=(channels.close,), registry=registry, tracer_provider=tracer_provider)


def build(cfg: Config, deps: Deps) -> MeshServer:
    """The bound (not yet started) server with the health servicer and its shutdown hooks; port 0 allowed."""
    servicer = HealthServicer(deps.monitor)
    mesh = build_server(
        cfg.runtime,
        [Registration.of(SERVICE_NAME, health_pb2_grpc.add_HealthServiceServicer_to_server, servicer)],
        registry=deps.registry,
        tracer_provider=deps.tracer_provider,
    )
    mesh.add_shutdown_hook(deps.monitor.stop)
    for closer in deps.closers:
        mesh.add_shutdown_hook(closer, after_drain=True)
    return mesh
