"""The send service: store, clients and engine (:func:`connect`), then the server (:func:`build`).

Start (a meshcore start hook, before grpc.health.v1 reports SERVING): open the store, join the replicas'
group with this server's advertised address, take a fair share of the free outbox shards and load their
open requests, start the engine and follow the node's health. Shutdown (SIGTERM): NOT_SERVING; the engine
stops starting attempts, lets running ones save their results, leaves the group and releases its shards
(the other replicas take them over at once); then the clients and the store close.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.send.v1 import send_pb2_grpc
from meshcore import MeshServer, Registration, build_server
from msgstore.factory import create_store
from msgstore.protocol import MsgStore
from services.send.clients import EdgePeers, HealthFollower, HistoryLookup, SubscriptionCoverage
from services.send.config import Config
from services.send.engine import SendEngine
from services.send.metrics import SendMetrics
from services.send.ownership import ShardOwnership
from services.send.ports import EngineSettings
from services.send.replicas import SendReplicas
from services.send.schedule import RetryPolicy
from services.send.sealing import Sealer
from services.send.service import SendApi
from services.send.servicer import SERVICE_NAME, SendServicer
from services.send.storenodes import StoreNodes
from services.send.validation import SendRules

__all__ = ["Deps", "advertised_address", "build", "connect", "rules_from"]


@dataclass(frozen=True)
class Deps:
    """What the server is built from besides the config."""

    store: MsgStore
    engine: SendEngine
    health: HealthFollower | None
    replicas: SendReplicas | None = None
    coverage: SubscriptionCoverage | None = None
    closers: tuple[Callable[[], object], ...] = ()
    starters: tuple[Callable[[], Awaitable[None]], ...] = ()
    registry: CollectorRegistry = REGISTRY
    tracer_provider: trace.TracerProvider | None = field(default=None)
    clock: Callable[[], float] = time.time


def rules_from(cfg: Config) -> SendRules:
    """Validation and scheduling settings the config describes."""
    msg = cfg.messaging
    return SendRules(
        topics=msg.topics,
        default_ttl_s=cfg.default_ttl_s,
        max_attempts=1 + cfg.retries,
        store_confirmation=msg.store_confirmation,
        confirm_content_topics=frozenset(msg.confirm_content_topics),
    )


def connect(
    cfg: Config,
    *,
    store: MsgStore | None = None,
    registry: CollectorRegistry = REGISTRY,
    tracer_provider: trace.TracerProvider | None = None,
    clock: Callable[[], float] = time.time,
    owner: str = "",
) -> Deps:
    """Store (not yet opened), clients and engine; ``owner`` names this replica in the leases."""
    store = store if store is not None else create_store(cfg.store)
    edges = EdgePeers(
        cfg.edge_peer_addrs,
        publish_timeout_s=cfg.publish_timeout_s,
        call_timeout_s=cfg.call_timeout_s,
        registry=registry,
        tracer_provider=tracer_provider,
    )
    history = HistoryLookup(
        cfg.history_addr,
        call_timeout_s=cfg.call_timeout_s,
        registry=registry,
        tracer_provider=tracer_provider,
    )
    # MESSAGING-API "Acknowledgements": configured storeNodes are the store; without, the mesh's archive.
    store_nodes = (
        StoreNodes(msg_nodes, timeout_s=cfg.call_timeout_s)
        if (msg_nodes := cfg.messaging.store_nodes)
        else None
    )
    owner = owner or f"{socket.gethostname()}/{uuid.uuid4().hex[:8]}"
    ownership = ShardOwnership(store, cfg.store.outbox_shards, owner, cfg.lease_ttl_s, clock)
    replicas = SendReplicas(
        owner, call_timeout_s=cfg.call_timeout_s, registry=registry, tracer_provider=tracer_provider
    )
    policy = RetryPolicy(
        retries=cfg.retries, backoff_s=cfg.backoff_s, store_check_delay_s=cfg.store_check_delay_s
    )
    metrics = SendMetrics.for_registry(registry)
    engine = SendEngine(
        store,
        ownership,
        edges,
        store_nodes if store_nodes is not None else history,
        Sealer(max_pow=cfg.max_pow, work_time_s=cfg.seal_work_time_s),
        EngineSettings(
            policy=policy,
            max_in_flight=cfg.max_in_flight,
            lease_ttl_s=cfg.lease_ttl_s,
            adopt_interval_s=cfg.adopt_interval_s,
        ),
        metrics,
        clock,
    )
    health = (
        HealthFollower(cfg.health_addr, engine.set_health, registry=registry, tracer_provider=tracer_provider)
        if cfg.health_addr
        else None
    )
    # MESSAGING-API "storeConfirmation": subscriptions matter only when it is on.
    coverage = (
        SubscriptionCoverage(
            cfg.subscription_addr,
            refresh_s=cfg.subscription_refresh_s,
            call_timeout_s=cfg.call_timeout_s,
            on_read=metrics.subscribed_topics.set,
            registry=registry,
            tracer_provider=tracer_provider,
        )
        if cfg.subscription_addr and cfg.messaging.store_confirmation
        else None
    )
    closers: list[Callable[[], object]] = [edges.close, history.close, replicas.close]
    if coverage is not None:
        closers.append(coverage.close)
    starters: list[Callable[[], Awaitable[None]]] = []
    if store_nodes is not None:
        starters.append(store_nodes.start)
        closers.append(store_nodes.close)
    if health is not None:
        closers.insert(0, health.close)
    return Deps(
        store,
        engine,
        health,
        replicas,
        coverage,
        tuple(closers),
        tuple(starters),
        registry,
        tracer_provider,
        clock,
    )


def advertised_address(cfg: Config, port: int) -> str:
    """Where the other replicas reach this one: SEND_ADVERTISE_ADDR, else the gRPC host (this host's
    address when that is a wildcard) with the bound port."""
    if cfg.advertise_addr:
        return cfg.advertise_addr
    host = cfg.runtime.grpc_host
    if host in ("", "0.0.0.0", "::", "[::]"):
        try:
            host = socket.gethostbyname(socket.gethostname())
        except OSError:
            host = "127.0.0.1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def build(cfg: Config, deps: Deps) -> MeshServer:
    """A bound, not yet started server for mailmesh.send.v1.SendService; port 0 allowed."""
    api = SendApi(
        deps.engine,
        deps.store,
        rules_from(cfg),
        clock=deps.clock,
        watch_poll_s=cfg.watch_poll_s,
        replicas=deps.replicas,
        covered=deps.coverage.covers if deps.coverage is not None else None,
    )
    mesh = build_server(
        cfg.runtime,
        [Registration.of(SERVICE_NAME, send_pb2_grpc.add_SendServiceServicer_to_server, SendServicer(api))],
        registry=deps.registry,
        tracer_provider=deps.tracer_provider,
    )
    deps.engine.ownership.address = advertised_address(cfg, mesh.port)  # bound: port 0 is resolved

    async def start() -> None:
        for starter in deps.starters:
            await starter()
        await deps.store.open()
        api.opened()
        await deps.engine.first_tick()
        deps.engine.start()
        if deps.health is not None:
            deps.health.start()
        if deps.coverage is not None:
            deps.coverage.start()

    mesh.add_start_hook(start)
    mesh.add_shutdown_hook(api.close)
    mesh.add_shutdown_hook(deps.engine.stop)
    for closer in deps.closers:
        mesh.add_shutdown_hook(closer, after_drain=True)  # type: ignore[arg-type]
    mesh.add_shutdown_hook(deps.store.close, after_drain=True)
    return mesh
