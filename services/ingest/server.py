"""Building the ingest server: dependencies from the config, the gRPC server, the shutdown order.

Shutdown (meshcore's sequence, SIGTERM): health goes NOT_SERVING; :meth:`IngestServicer.drain` makes every
stream stop reading and end UNAVAILABLE once it has sent the acks it owes; in-flight calls get the grace
period; then, after the drain, the batcher writes out what is still queued and the archive channel closes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.ingest.v1 import ingest_pb2_grpc
from meshcore import MeshServer, Registration, build_server
from meshcore.server import ShutdownHook
from services.ingest.batcher import Batcher
from services.ingest.clients import ArchiveClient
from services.ingest.config import Config
from services.ingest.logic import Ingestor
from services.ingest.metrics import IngestMetrics
from services.ingest.model import Accepted
from services.ingest.servicer import SERVICE_NAME, IngestServicer
from services.ingest.validation import Rules

__all__ = ["Deps", "build", "connect", "rules_from"]


@dataclass(frozen=True)
class Deps:
    """What the server needs besides its config."""

    ingestor: Ingestor
    """The ingest logic (its batcher already started)."""
    closers: Sequence[ShutdownHook] = ()
    """Run after the batcher is flushed, in order (e.g. close the archive channel)."""
    registry: CollectorRegistry = REGISTRY
    """Where the gRPC and domain metrics live."""
    tracer_provider: trace.TracerProvider | None = field(default=None)
    """None = the global one."""


def rules_from(cfg: Config) -> Rules:
    """The validation rules the config describes."""
    return Rules(
        max_message_size=cfg.max_message_size,
        min_pow=cfg.min_pow,
        sync_allowance_s=cfg.sync_allowance_s,
        topic_allowlist=cfg.topic_allowlist,
    )


async def connect(
    cfg: Config,
    *,
    registry: CollectorRegistry = REGISTRY,
    tracer_provider: trace.TracerProvider | None = None,
) -> Deps:
    """Open the archive channel, start the batcher and build the ingest logic (call from the event loop)."""
    archive = ArchiveClient.connect(cfg, registry=registry, tracer_provider=tracer_provider)
    metrics = IngestMetrics(registry)
    batcher: Batcher[Accepted] = Batcher(
        archive.put,
        max_items=cfg.batch_max_envelopes,
        max_bytes=cfg.batch_max_bytes,
        max_delay_s=cfg.batch_max_delay_s,
        max_pending_items=cfg.max_pending_envelopes,
        max_pending_bytes=cfg.max_pending_bytes,
        max_inflight=cfg.max_inflight_writes,
        seen_cache_size=cfg.seen_cache_size,
        observer=metrics,
    )
    batcher.start()
    ingestor = Ingestor(rules_from(cfg), batcher, metrics, pubsub_topic=cfg.pubsub_topic)
    return Deps(ingestor, closers=(archive.close,), registry=registry, tracer_provider=tracer_provider)


def build(cfg: Config, deps: Deps) -> MeshServer:
    """The bound (not yet started) server with the ingest servicer and its shutdown hooks; port 0 allowed."""
    servicer = IngestServicer(deps.ingestor, max_unacked_batches=cfg.stream_max_unacked_batches)
    mesh = build_server(
        cfg.runtime,
        [Registration.of(SERVICE_NAME, ingest_pb2_grpc.add_IngestServiceServicer_to_server, servicer)],
        registry=deps.registry,
        tracer_provider=deps.tracer_provider,
    )
    mesh.add_shutdown_hook(servicer.drain)
    mesh.add_shutdown_hook(deps.ingestor.close, after_drain=True)
    for closer in deps.closers:
        mesh.add_shutdown_hook(closer, after_drain=True)
    return mesh
