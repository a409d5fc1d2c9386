"""Helpers for the health service's integration tests: the service on port 0, and a WatchHealth reader."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc.aio
from prometheus_client import CollectorRegistry

from mailmesh.health.v1 import health_pb2, health_pb2_grpc
from meshcore import MeshServer
from meshcore.discovery import Resolve, resolve_addresses
from services.health.config import Config
from services.health.server import Deps, build, connect

#: Fast enough that the tests spend little time waiting for the hysteresis, slow enough for the 2-core box.
POLL_S = "0.1"
HOLD_S = "0.3"


def health_env(edge_peers: Sequence[str], archives: Sequence[str], **extra: str) -> dict[str, str]:
    """HEALTH_* variables for a test instance: port 0, no metrics port, informational services off."""
    env = {
        "HEALTH_GRPC_HOST": "127.0.0.1",
        "HEALTH_GRPC_PORT": "0",
        "HEALTH_METRICS_PORT": "-1",
        "HEALTH_SHUTDOWN_GRACE_SECONDS": "5",
        "HEALTH_EDGE_ADDR": ",".join(edge_peers),
        "HEALTH_ARCHIVE_ADDR": ",".join(archives),
        "HEALTH_INGEST_ADDR": "",
        "HEALTH_HISTORY_ADDR": "",
        "HEALTH_SEND_ADDR": "",
        "HEALTH_SUBSCRIPTION_ADDR": "",
        "HEALTH_GATEWAY_ADDR": "",
        "HEALTH_POLL_INTERVAL_SECONDS": POLL_S,
        "HEALTH_HOLD_SECONDS": HOLD_S,
        "HEALTH_CALL_TIMEOUT_SECONDS": "2",
    }
    env.update(extra)
    return env


@dataclass
class HealthHandle:
    """A running health service and a channel to it."""

    cfg: Config
    deps: Deps
    mesh: MeshServer
    registry: CollectorRegistry
    channel: grpc.aio.Channel

    @property
    def stub(self) -> health_pb2_grpc.HealthServiceAsyncStub:
        return health_pb2_grpc.HealthServiceStub(self.channel)

    async def report(self) -> health_pb2.HealthReport:
        return (await self.stub.GetHealth(health_pb2.GetHealthRequest(), timeout=10)).report

    def watch(self, mode: int = health_pb2.WATCH_MODE_STATUS) -> Watch:
        return Watch(self.stub.WatchHealth(health_pb2.WatchHealthRequest(mode=mode)))  # type: ignore[arg-type]

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, labels or {})

    async def stop(self) -> None:
        await self.channel.close()
        await self.mesh.stop(grace=2.0)


async def start_health(edge_peers: Sequence[str], archives: Sequence[str], **extra: str) -> HealthHandle:
    """Connect, build and start the health service the way __main__ does, with a private registry."""
    return await start_health_resolving(resolve_addresses, edge_peers, archives, **extra)


async def start_health_resolving(
    resolve: Resolve, edge_peers: Sequence[str], archives: Sequence[str], **extra: str
) -> HealthHandle:
    """:func:`start_health` with ``resolve`` answering for the ``dns:`` targets (meshcore.discovery)."""
    cfg = Config.from_env(health_env(edge_peers, archives, **extra))
    registry = CollectorRegistry()
    deps = connect(cfg, registry=registry, resolve=resolve)
    mesh = build(cfg, deps)
    await mesh.start()
    return HealthHandle(cfg, deps, mesh, registry, grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}"))


class Watch:
    """Reads a WatchHealth stream message by message: each wait ends when the server sends (event-driven)."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.seen: list[health_pb2.WatchHealthResponse] = []

    async def next(self) -> health_pb2.WatchHealthResponse:
        message = await self.call.read()
        assert message is not grpc.aio.EOF, "the stream ended"
        self.seen.append(message)
        return message  # type: ignore[no-any-return]

    async def until(
        self, condition: Callable[[health_pb2.HealthReport], bool]
    ) -> health_pb2.WatchHealthResponse:
        """The first message whose report meets ``condition`` (in WATCH_MODE_ANY every change arrives)."""
        while True:
            message = await self.next()
            if condition(message.report):
                return message

    def cancel(self) -> None:
        self.call.cancel()
