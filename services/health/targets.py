"""What the health monitor queries: every instance of every ``HEALTH_*_ADDR`` target, kept current.

A target is one instance (``host:port``) or a ``dns:///name:port`` that stands for every address the name
resolves to — in Kubernetes a headless Service, whose DNS lists each ready replica
(:mod:`meshcore.discovery`). Each resolved address is checked like a listed instance: one ``grpc.health.v1``
check (an edge peer: NodeInfo and ListPeers) per evaluation, NOT_SERVING or unreachable counting as they do
for a listed one. When the set changes the monitor queries the new set from its next evaluation on, and the
channels of addresses that are gone are closed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from meshcore.discovery import Instances, Resolve, resolve_addresses
from services.health.clients import GRPC_SERVICES, Channels, EdgePeerClient, HealthCheckClient
from services.health.config import Config
from services.health.monitor import HealthMonitor, ServiceTarget

__all__ = ["HealthTargets", "by_service"]


def by_service(cfg: Config) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(mesh name, targets) of every service whose grpc.health.v1 is checked: the archive (it affects the
    status) first, then the others for information, edge peers included."""
    return (
        ("archive", cfg.archive_addrs),
        ("edge-peer", cfg.edge_peer_addrs),
        ("ingest", cfg.ingest_addrs),
        ("history-query", cfg.history_addrs),
        ("send", cfg.send_addrs),
        ("subscription", cfg.subscription_addrs),
        ("gateway", cfg.gateway_addrs),
    )


class HealthTargets:
    """The edge-peer and service instances behind the config's targets, as monitor ports."""

    def __init__(
        self,
        cfg: Config,
        channels: Channels,
        *,
        resolve: Resolve = resolve_addresses,
    ) -> None:
        self._cfg = cfg
        self._channels = channels
        every = [t for _, targets in by_service(cfg) for t in targets]
        self.instances = Instances(every, resolve=resolve, interval_s=cfg.discovery_interval_s)
        """The resolved addresses of every target (refreshed by :meth:`start` or by hand in tests)."""
        self._monitor: HealthMonitor | None = None
        self._edges: dict[str, EdgePeerClient] = {}
        self._checks: dict[str, HealthCheckClient] = {}
        self.instances.listeners.append(self._changed)

    def edge_peers(self) -> list[EdgePeerClient]:
        """One client per edge-peer instance now known."""
        current = self.instances.current
        addresses = dict.fromkeys(a for t in self._cfg.edge_peer_addrs for a in current[t])
        return [self._edge(a) for a in addresses]

    def services(self) -> list[ServiceTarget]:
        """One check per service instance now known (an address listed under two targets is checked once)."""
        current = self.instances.current
        found: list[ServiceTarget] = []
        for name, targets in by_service(self._cfg):
            for address in dict.fromkeys(a for t in targets for a in current[t]):
                found.append(
                    ServiceTarget(name, GRPC_SERVICES[name], self._check(address), name == "archive")
                )
        return found

    def follow(self, monitor: HealthMonitor) -> None:
        """Give ``monitor`` the current instances now and after every change."""
        self._monitor = monitor
        monitor.set_targets(self.edge_peers(), self.services())

    async def start(self) -> None:
        """Resolve the ``dns:`` targets, then keep them current (meshcore.discovery)."""
        await self.instances.start()

    async def stop(self) -> None:
        """Stop resolving."""
        await self.instances.stop()

    def _edge(self, address: str) -> EdgePeerClient:
        client = self._edges.get(address)
        if client is None:
            client = self._edges[address] = EdgePeerClient(self._channels, address)
        return client

    def _check(self, address: str) -> HealthCheckClient:
        client = self._checks.get(address)
        if client is None:
            client = self._checks[address] = HealthCheckClient(self._channels, address)
        return client

    async def _changed(self, current: Mapping[str, Sequence[str]]) -> None:
        if self._monitor is not None:
            self._monitor.set_targets(self.edge_peers(), self.services())
        known = {a for addresses in current.values() for a in addresses}
        self._edges = {a: c for a, c in self._edges.items() if a in known}
        self._checks = {a: c for a, c in self._checks.items() if a in known}
        await self._channels.retain(known)
