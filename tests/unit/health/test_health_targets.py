"""The health monitor's targets: each address a dns: target resolves to is one instance (an edge peer, or a
replica whose grpc.health.v1 is checked), kept current by re-resolution driven by hand here (an injected
resolver: no DNS, no sleeps); listed instances stay as they are; gone instances lose their channel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from prometheus_client import CollectorRegistry

from services.health.clients import Channels
from services.health.config import Config
from services.health.monitor import EdgePeerPort, HealthMonitor, ServiceTarget
from services.health.targets import HealthTargets

HISTORY = "dns:///history-query-headless.mesh.svc:50054"
EDGES = "dns:///edge-peer.mesh.svc:50051"


class Zone:
    """name → IP addresses, edited by the test."""

    def __init__(self, **records: list[str]) -> None:
        self.records = {name.replace("_", "-"): found for name, found in records.items()}

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        return [f"{ip}:{port}" for ip in self.records[host.split(".")[0]]]


class Monitor:
    """What HealthTargets tells the monitor."""

    def __init__(self) -> None:
        self.edges: list[str] = []
        self.services: list[tuple[str, str, bool]] = []

    def set_targets(self, edge_peers: Sequence[EdgePeerPort], services: Sequence[ServiceTarget]) -> None:
        self.edges = [p.target for p in edge_peers]
        self.services = [(s.service, s.port.target, s.affects_status) for s in services]


def config(**env: str) -> Config:
    base = {
        "HEALTH_EDGE_ADDR": EDGES,
        "HEALTH_ARCHIVE_ADDR": "archive-0:50053",
        "HEALTH_INGEST_ADDR": "",
        "HEALTH_HISTORY_ADDR": HISTORY,
        "HEALTH_SEND_ADDR": "",
        "HEALTH_SUBSCRIPTION_ADDR": "",
        "HEALTH_GATEWAY_ADDR": "",
    }
    return Config.from_env(base | env)


def channels() -> Channels:
    return Channels(timeout_s=1, registry=CollectorRegistry())


async def test_every_resolved_address_is_an_instance_and_the_set_follows_the_records() -> None:
    zone = Zone(history_query_headless=["10.0.0.2", "10.0.0.1"], edge_peer=["10.0.1.1"])
    chans = channels()
    targets = HealthTargets(config(), chans, resolve=zone)
    monitor = Monitor()
    targets.follow(cast(HealthMonitor, monitor))
    # Before the first resolution only the listed archive is known.
    assert monitor.edges == [] and monitor.services == [("archive", "archive-0:50053", True)]

    assert await targets.instances.refresh()
    assert monitor.edges == ["10.0.1.1:50051"]
    assert monitor.services == [
        ("archive", "archive-0:50053", True),
        ("edge-peer", "10.0.1.1:50051", False),
        ("history-query", "10.0.0.1:50054", False),
        ("history-query", "10.0.0.2:50054", False),
    ]
    first = {p.target: p for p in targets.edge_peers()}
    for client in targets.services():  # a channel per instance, shared by its edge and health clients
        chans.get(client.port.target)

    zone.records["history-query-headless"] = ["10.0.0.2", "10.0.0.3"]  # .1 gone, .3 new
    zone.records["edge-peer"] = ["10.0.1.1", "10.0.1.2"]
    assert await targets.instances.refresh()
    assert monitor.edges == ["10.0.1.1:50051", "10.0.1.2:50051"]
    assert [s for s in monitor.services if s[0] == "history-query"] == [
        ("history-query", "10.0.0.2:50054", False),
        ("history-query", "10.0.0.3:50054", False),
    ]
    assert targets.edge_peers()[0] is first["10.0.1.1:50051"]  # a kept instance keeps its client
    assert "10.0.0.1:50054" not in chans.targets and "10.0.0.2:50054" in chans.targets
    await chans.close()


async def test_without_dns_targets_nothing_is_resolved() -> None:
    async def no_dns(host: str, port: int) -> Sequence[str]:
        raise AssertionError("nothing to resolve")

    targets = HealthTargets(
        config(HEALTH_EDGE_ADDR="e-0.e:1,e-1.e:1", HEALTH_HISTORY_ADDR="h:2"), channels(), resolve=no_dns
    )
    monitor = Monitor()
    targets.follow(cast(HealthMonitor, monitor))
    await targets.start()
    assert not targets.instances.dynamic
    assert monitor.edges == ["e-0.e:1", "e-1.e:1"]
    assert [s[1] for s in monitor.services] == ["archive-0:50053", "e-0.e:1", "e-1.e:1", "h:2"]
    await targets.stop()
