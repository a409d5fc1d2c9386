"""Building the edge peer: :func:`assemble` wires node, devp2p server, feed, forwarder and history adapter;
:func:`build` puts the gRPC servicer on top with the shutdown order. Tests call both with port 0.

Shutdown (SIGTERM, meshcore's sequence): health NOT_SERVING; then (hook) Disconnect 0x08 to every devp2p peer,
the node's loops stop and live streams end with UNAVAILABLE; in-flight RPCs drain; then (after the drain) the
ingest buffer is flushed for up to the shutdown grace — what cannot be acknowledged by then is counted and
logged — and the client channels close.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from devp2p.server import Server
from mailmesh.edgepeer.v1 import edgepeer_pb2_grpc
from meshcore import MeshServer, Registration, build_server
from meshcore.server import ShutdownHook
from services.edge_peer.config import Config, node_config, server_config
from services.edge_peer.feed import LiveFeed
from services.edge_peer.forwarder import IngestForwarder, IngestPort
from services.edge_peer.logic import EdgePeer
from services.edge_peer.mailserver_bridge import HistoryQueryPort, MailserverBridge
from services.edge_peer.metrics import register
from services.edge_peer.servicer import SERVICE_NAME, EdgePeerServicer
from services.edge_peer.sink import EdgeSink
from wakunode.node import WakuNode

__all__ = ["Deps", "assemble", "build", "instance_name"]


@dataclass(frozen=True)
class Deps:
    """What the gRPC server needs besides its config."""

    edge: EdgePeer
    """The edge peer (started before the server, stopped by its shutdown hooks)."""
    closers: Sequence[ShutdownHook] = ()
    """Run last, after the ingest flush (e.g. close client channels)."""
    registry: CollectorRegistry = REGISTRY
    """Where gRPC and domain metrics live."""
    tracer_provider: trace.TracerProvider | None = field(default=None)
    """None = the global one."""


def instance_name(cfg: Config) -> str:
    """EDGE_INSTANCE, or the host name."""
    return cfg.instance or socket.gethostname()


def assemble(
    cfg: Config,
    node_key: bytes,
    ingest: IngestPort,
    history: HistoryQueryPort | None,
    *,
    tracer_provider: trace.TracerProvider | None = None,
) -> EdgePeer:
    """The (not yet started) edge peer: node + devp2p server + feed + ingest forwarder + history adapter;
    the spans it opens itself (history requests, published envelopes) go to ``tracer_provider`` (None: the
    global one)."""
    feed = LiveFeed(replay_envelopes=cfg.stream_replay_envelopes, replay_bytes=cfg.stream_replay_bytes)
    forwarder = IngestForwarder(
        ingest,
        max_envelopes=cfg.ingest_buffer_envelopes,
        max_bytes=cfg.ingest_buffer_bytes,
        max_wait_s=cfg.ingest_buffer_wait_s,
        window=cfg.ingest_window,
        reconnect_max_s=cfg.ingest_reconnect_max_s,
    )
    adapter = MailserverBridge(history, tracer_provider) if history is not None else None
    node = WakuNode(node_config(cfg), EdgeSink(feed, forwarder), adapter)
    server = Server(node_key, node.protocols, server_config(cfg))
    return EdgePeer(
        node,
        server,
        feed,
        forwarder,
        adapter,
        instance=instance_name(cfg),
        static_peers=cfg.static_peers,
        bootnodes=cfg.bootnodes,
        trusted_peers=cfg.trusted_peers,
        tracer_provider=tracer_provider,
    )


def build(cfg: Config, deps: Deps) -> MeshServer:
    """The bound (not yet started) gRPC server over ``deps.edge`` with its shutdown hooks; port 0 allowed."""
    edge = deps.edge
    servicer = EdgePeerServicer(
        edge, stream_queue=cfg.stream_queue_envelopes, stream_queue_bytes=cfg.stream_queue_bytes
    )
    register(edge, deps.registry)
    mesh = build_server(
        cfg.runtime,
        [Registration.of(SERVICE_NAME, edgepeer_pb2_grpc.add_EdgePeerServiceServicer_to_server, servicer)],
        registry=deps.registry,
        tracer_provider=deps.tracer_provider,
    )
    grace = cfg.runtime.shutdown_grace_s

    async def flush() -> None:
        await edge.close(flush_timeout=grace)

    mesh.add_shutdown_hook(edge.stop_intake)
    mesh.add_shutdown_hook(flush, after_drain=True)
    for closer in deps.closers:
        mesh.add_shutdown_hook(closer, after_drain=True)
    return mesh
