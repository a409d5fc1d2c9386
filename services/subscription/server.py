"""The subscription service from its config: store, clients and app (:func:`connect`), then the server
(:func:`build`).

Start (a meshcore start hook, before grpc.health.v1 reports SERVING): the store opens and the recorder
starts; until then every RPC answers UNAVAILABLE. Shutdown (SIGTERM): the live event streams end (they
never end on their own), the followers stop, the writer lease is released so another replica takes over at
once, the store closes, then the channels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.subscription.v1 import subscription_pb2_grpc
from meshcore import MeshServer, Registration, build_server
from meshcore.discovery import Instances, Resolve, resolve_addresses
from meshcore.server import ShutdownHook
from msgstore.factory import create_store
from msgstore.protocol import MsgStore
from services.subscription.app import Feeds, SubscriptionApp
from services.subscription.clients import (
    HISTORY_SERVICE,
    Channels,
    EdgeFeedClient,
    HealthFeedClient,
    LookupClient,
    SendFeedClient,
    ServedFeedClient,
)
from services.subscription.config import Config
from services.subscription.metrics import SubscriptionMetrics
from services.subscription.served import ServedDiscovery
from services.subscription.servicer import SERVICE_NAME, SubscriptionServicer

__all__ = ["Deps", "build", "connect", "served_discovery"]


@dataclass(frozen=True)
class Deps:
    """What the server needs besides its config."""

    app: SubscriptionApp
    """Store, recorder, hub and followers (started by the server's start hook)."""
    closers: Sequence[ShutdownHook] = ()
    """Run after the app stopped, in order (e.g. close the channels)."""
    registry: CollectorRegistry = REGISTRY
    """Where the gRPC and domain metrics live."""
    tracer_provider: trace.TracerProvider | None = field(default=None)
    """None = the global one."""


def served_discovery(
    cfg: Config, channels: Channels, resolve: Resolve = resolve_addresses
) -> ServedDiscovery:
    """The history-query instances of ``cfg.served_targets`` (a ``dns:`` target: each address it resolves
    to), each reached by its own channel, closed when the instance is gone."""
    return ServedDiscovery(
        Instances(cfg.served_targets, resolve=resolve, interval_s=cfg.discovery_interval_s),
        lambda address: ServedFeedClient(channels, address),
        lambda address: channels.drop(address, HISTORY_SERVICE),
    )


def connect(
    cfg: Config,
    *,
    store: MsgStore | None = None,
    feeds: Feeds | None = None,
    registry: CollectorRegistry = REGISTRY,
    tracer_provider: trace.TracerProvider | None = None,
    clock: Callable[[], float] = time.time,
    resolve: Resolve = resolve_addresses,
) -> Deps:
    """Build the store (unless given), the clients (unless ``feeds`` is given) and the app; nothing starts.
    ``resolve`` finds the history-query instances behind a ``dns:`` target (tests inject their own)."""
    closers: list[ShutdownHook] = []
    if feeds is None:
        channels = Channels(registry=registry, tracer=tracer_provider)
        feeds = Feeds(
            [EdgeFeedClient(channels, target) for target in cfg.edge_peer_addrs],
            HealthFeedClient(channels, cfg.health_addr),
            LookupClient(channels, cfg.history_addr, timeout_s=cfg.call_timeout_s),
            SendFeedClient(channels, cfg.send_addr) if cfg.send_addr else None,
            served_discovery(cfg, channels, resolve),
        )
        closers.append(channels.close)
    app = SubscriptionApp(
        store or create_store(cfg.store),
        feeds,
        cfg.messaging,
        replica_id=cfg.replica,
        lease_ttl=cfg.writer_lease_s,
        tail_interval=cfg.tail_interval_s,
        consumer_buffer=cfg.consumer_buffer,
        clock=clock,
        maintain_interval=cfg.maintain_interval_s,
    )
    SubscriptionMetrics.for_registry(registry).follow(app.recorder, app.hub, app.inputs, app.on_resume_miss)
    return Deps(app, closers=tuple(closers), registry=registry, tracer_provider=tracer_provider)


def build(cfg: Config, deps: Deps) -> MeshServer:
    """The bound (not yet started) server with the servicer, its start and shutdown hooks; port 0 allowed."""
    servicer = SubscriptionServicer(deps.app)
    mesh = build_server(
        cfg.runtime,
        [
            Registration.of(
                SERVICE_NAME, subscription_pb2_grpc.add_SubscriptionServiceServicer_to_server, servicer
            )
        ],
        registry=deps.registry,
        tracer_provider=deps.tracer_provider,
    )
    mesh.add_start_hook(deps.app.start)
    mesh.add_shutdown_hook(deps.app.stop)
    mesh.add_shutdown_hook(deps.app.close, after_drain=True)
    for closer in deps.closers:
        mesh.add_shutdown_hook(closer, after_drain=True)
    return mesh
