"""The health service from its config: clients and monitor (:func:`connect`), then the server (:func:`build`).

Shutdown (meshcore's sequence, SIGTERM): grpc.health.v1 goes NOT_SERVING; the watch streams end with
UNAVAILABLE (they never end on their own and would otherwise hold the server for its whole grace) and the
evaluation loop stops; in-flight GetHealth calls finish; then the channels close.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.health.v1 import health_pb2_grpc
from meshcore import MeshServer, Registration, build_server
from meshcore.discovery import Resolve, resolve_addresses
from meshcore.server import ShutdownHook
from services.health.clients import Channels
from services.health.config import Config
from services.health.logic import Thresholds
from services.health.metrics import HealthMetrics
from services.health.monitor import HealthMonitor
from services.health.servicer import SERVICE_NAME, HealthServicer
from services.health.targets import HealthTargets
from services.health.watch import WatchHub

__all__ = ["Deps", "build", "connect", "thresholds_from"]


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
    targets: HealthTargets | None = None
    """The instances the monitor queries (None: the monitor's own fixed list)."""
    stoppers: Sequence[ShutdownHook] = ()
    """Run before the drain, with the monitor's stop (e.g. end the discovery)."""


def thresholds_from(cfg: Config) -> Thresholds:
    """The thresholds and dwell times the config describes."""
    return Thresholds(
        minimally_healthy_peers=cfg.minimally_healthy_peers,
        healthy_peers=cfg.healthy_peers,
        hold_s=cfg.hold_s,
        loss_hold_s=cfg.loss_hold_s,
    )


def connect(
    cfg: Config,
    *,
    registry: CollectorRegistry = REGISTRY,
    tracer_provider: trace.TracerProvider | None = None,
    clock: Callable[[], float] = time.time,
    start: bool = True,
    resolve: Resolve = resolve_addresses,
) -> Deps:
    """Open the channels and build the monitor; ``start`` resolves the ``dns:`` targets, then begins
    evaluating (call from the event loop); without it the test refreshes ``Deps.targets`` and evaluates."""
    channels = Channels(timeout_s=cfg.call_timeout_s, registry=registry, tracer_provider=tracer_provider)
    metrics = HealthMetrics.for_registry(registry)
    hub = WatchHub(min_interval_s=cfg.watch_min_interval_s)
    metrics.follow_watchers(hub)
    targets = HealthTargets(cfg, channels, resolve=resolve)
    monitor = HealthMonitor(
        targets.edge_peers(),
        targets.services(),
        thresholds_from(cfg),
        hub=hub,
        observer=metrics,
        clock=clock,
    )
    targets.follow(monitor)
    starter = None
    if start:

        async def begin() -> None:
            # The first evaluation waits for the first resolution: a dns: archive target with no instance
            # yet would otherwise report the node Unhealthy for no reason.
            await targets.start()
            monitor.start(cfg.poll_interval_s)

        starter = asyncio.get_running_loop().create_task(begin(), name="health-start")

    async def stop_targets() -> None:
        if starter is not None and not starter.done():
            starter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starter
        await targets.stop()

    return Deps(
        monitor,
        closers=(channels.close,),
        registry=registry,
        tracer_provider=tracer_provider,
        targets=targets,
        stoppers=(stop_targets,),
    )


def build(cfg: Config, deps: Deps) -> MeshServer:
    """The bound (not yet started) server with the health servicer and its shutdown hooks; port 0 allowed."""
    servicer = HealthServicer(deps.monitor)
    mesh = build_server(
        cfg.runtime,
        [Registration.of(SERVICE_NAME, health_pb2_grpc.add_HealthServiceServicer_to_server, servicer)],
        registry=deps.registry,
        tracer_provider=deps.tracer_provider,
    )
    for stopper in deps.stoppers:
        mesh.add_shutdown_hook(stopper)
    mesh.add_shutdown_hook(deps.monitor.stop)
    for closer in deps.closers:
        mesh.add_shutdown_hook(closer, after_drain=True)
    return mesh
