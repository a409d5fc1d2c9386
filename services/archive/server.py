"""Builds the archive server: the store adapter from the config, the servicer, health, background duties.

The store is built by ``__main__`` with :func:`archivestore.factory.create_store` and handed in through
:class:`Deps`, so this module knows no backend. :func:`build` is synchronous, like every service's: it returns
a bound server whose start hook (``meshcore.server``) opens the store before health reports SERVING (RPCs that
arrive meanwhile get UNAVAILABLE); if the store is unreachable at that moment the server still runs, answers
UNAVAILABLE and reports ``mailmesh.archive.v1.ArchiveService`` NOT_SERVING until a background opener succeeds
(a schema problem is fatal instead: it will not fix itself). The whole-server health (service ``""``) stays
SERVING once started while the process is healthy, so a liveness probe does not restart pods over a database
outage; readiness probes should name the ArchiveService.

Background duties, stopped by a shutdown hook before the server drains: the opener (only while the store
is not open), a store probe driving health (``ARCHIVE_HEALTH_PROBE_SECONDS``), the recount of
``mailserver_archived_envelopes_total`` (``ARCHIVE_STATS_INTERVAL_SECONDS``) and, on SQLite, the retention
cleaner (``ARCHIVE_PURGE_INTERVAL_SECONDS``). The store is closed by an after-drain hook, once no handler can
touch it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry.trace import TracerProvider
from prometheus_client import REGISTRY, CollectorRegistry

from archivestore.errors import StoreError
from archivestore.protocol import ArchiveStore
from mailmesh.archive.v1 import archive_pb2_grpc
from meshcore.server import MeshServer, Registration, build_server
from services.archive import maintenance as mt
from services.archive.config import Config
from services.archive.lifecycle import Periodic, StoreGate
from services.archive.metrics import ArchiveMetrics
from services.archive.servicer import SERVICE_NAME, ArchiveServicer, ServicerSettings

__all__ = ["Deps", "build", "settings_for"]

_log = logging.getLogger(__name__)
#: First retry of a store that could not be opened at start-up; doubled up to ARCHIVE_STORE_RETRY_MAX_SECONDS.
FIRST_RETRY_S = 1.0


def settings_for(cfg: Config) -> ServicerSettings:
    """What the servicer needs from ``cfg`` (SQLite has one shard per bucket whatever the config says)."""
    store = cfg.store
    shards = store.default_shards if store.backend == "cassandra" else (1, 1)
    return ServicerSettings(
        layout=mt.Layout(store.bucket_seconds),
        default_shards={mt.TIME_TABLE: shards[0], mt.TOPIC_TABLE: shards[1]},
        retention=store.retention,
        max_put_items=cfg.max_put_items,
        max_envelope_bytes=cfg.max_envelope_bytes,
        query_default_max_bytes=cfg.query_default_max_bytes,
        max_message_bytes=cfg.runtime.max_message_bytes,
    )


@dataclass
class Deps:
    """What :func:`build` is given rather than creating: the store, metrics registry, tracing, clock."""

    store: ArchiveStore
    registry: CollectorRegistry = REGISTRY
    tracer_provider: TracerProvider | None = None
    clock: Callable[[], float] = field(default=time.time)


def _duties(cfg: Config, deps: Deps, gate: StoreGate, metrics: ArchiveMetrics) -> list[Periodic]:
    store = deps.store

    def now() -> int:
        return int(deps.clock())

    async def probe() -> None:
        await gate.probe(now())

    async def recount() -> None:
        if gate.is_open:
            try:
                metrics.recount((await store.stats(now=now())).envelopes)
            except StoreError as err:
                _log.info("recount of archived envelopes skipped: %s", err)

    duties: list[Periodic] = []
    if not gate.is_open:
        duties.append(
            Periodic("open", FIRST_RETRY_S, gate.try_open, backoff=2.0, max_interval_s=cfg.store_retry_max_s)
        )
    if cfg.health_probe_interval_s > 0:
        duties.append(Periodic("probe", cfg.health_probe_interval_s, probe))
    if cfg.stats_interval_s > 0:
        duties.append(Periodic("recount", cfg.stats_interval_s, recount))
    purge_expired = getattr(store, "purge_expired", None)  # SQLite only: Cassandra expires rows by TTL
    if cfg.purge_interval_s > 0 and purge_expired is not None:

        async def purge() -> None:
            if gate.is_open:
                began = time.perf_counter()
                deleted = await purge_expired(now())
                metrics.purged(deleted, time.perf_counter() - began)
                if deleted:
                    _log.info("retention cleaner deleted %d envelopes", deleted)

        duties.append(Periodic("purge", cfg.purge_interval_s, purge))
    return duties


def build(cfg: Config, deps: Deps) -> MeshServer:
    """A bound, not yet started archive server; ``start()`` / ``serve_forever()`` opens the store first.

    The store is opened by a start hook (meshcore: before health reports SERVING). If it is unreachable
    the hook reports the ArchiveService NOT_SERVING and leaves a retrying opener running; a store error other
    than "unreachable" (a schema problem) fails ``start()``. The background duties start in the same hook and
    stop in a shutdown hook; the store closes after the server has drained.
    """
    metrics = ArchiveMetrics(deps.store.backend, deps.registry)

    async def on_health(reachable: bool) -> None:
        metrics.store_up(reachable)
        await mesh.set_serving(SERVICE_NAME, reachable)

    gate = StoreGate(deps.store, on_health)
    servicer = ArchiveServicer(gate, settings_for(cfg), metrics, deps.clock)
    mesh = build_server(
        cfg.runtime,
        [Registration.of(SERVICE_NAME, archive_pb2_grpc.add_ArchiveServiceServicer_to_server, servicer)],
        tracer_provider=deps.tracer_provider,
        registry=deps.registry,
    )
    duties: list[Periodic] = []

    async def open_store() -> None:
        await gate.try_open()  # health hears of it through on_health: NOT_SERVING while unreachable
        duties.extend(_duties(cfg, deps, gate, metrics))
        for duty in duties:
            duty.start()

    async def stop_duties() -> None:
        for duty in duties:
            await duty.stop()

    mesh.add_start_hook(open_store)
    mesh.add_shutdown_hook(stop_duties)
    mesh.add_shutdown_hook(gate.close, after_drain=True)
    return mesh
