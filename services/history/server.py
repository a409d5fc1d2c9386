"""Builds the history-query gRPC server: ``build(cfg, deps)``; tests call it with port 0."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from archivestore.types import Direction
from mailmesh.history.v1 import history_pb2_grpc
from meshcore import MeshServer, Registration, build_server
from services.history.config import Config
from services.history.cursor import CursorCodec
from services.history.logic import ArchivePort, HistoryService, HistorySettings
from services.history.metrics import HistoryMetrics
from services.history.served import ServedFeed
from services.history.servicer import SERVICE_NAME, HistoryServicer

__all__ = ["BATCH_HEADROOM_BYTES", "Deps", "build", "settings_from"]

#: Kept free in a gRPC message beside a batch's envelopes: protobuf framing of up to 1000 envelopes
#: (<= 6 bytes each) plus the response wrapper.
BATCH_HEADROOM_BYTES = 64 * 1024


@dataclass(frozen=True)
class Deps:
    """What the server is built from besides the config."""

    archive: ArchivePort
    cursor_secrets: Sequence[bytes]
    registry: CollectorRegistry = REGISTRY
    tracer_provider: trace.TracerProvider | None = None
    clock: Callable[[], float] = time.time


def settings_from(cfg: Config) -> HistorySettings:
    """The domain settings the config describes."""
    return HistorySettings(
        default_limit=cfg.default_limit,
        max_limit=cfg.max_limit,
        archive_page=cfg.archive_page,
        max_batch_bytes=cfg.max_batch_bytes,
        batch_bytes_ceiling=max(1024, cfg.runtime.max_message_bytes - BATCH_HEADROOM_BYTES),
        default_direction=Direction.FORWARD if cfg.default_direction == "forward" else Direction.BACKWARD,
    )


def build(cfg: Config, deps: Deps) -> MeshServer:
    """A bound, not yet started server for mailmesh.history.v1.HistoryQueryService."""
    served = ServedFeed(ring_hashes=cfg.served_ring_hashes)
    service = HistoryService(
        deps.archive,
        CursorCodec(deps.cursor_secrets),
        settings_from(cfg),
        clock=deps.clock,
        on_served=served.publish,
    )
    servicer = HistoryServicer(service, HistoryMetrics.for_registry(deps.registry), served)
    mesh = build_server(
        cfg.runtime,
        [Registration.of(SERVICE_NAME, history_pb2_grpc.add_HistoryQueryServiceServicer_to_server, servicer)],
        tracer_provider=deps.tracer_provider,
        registry=deps.registry,
    )
    mesh.add_shutdown_hook(_closing(served))  # WatchServed never ends by itself
    return mesh


def _closing(served: ServedFeed) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        served.close()

    return close
