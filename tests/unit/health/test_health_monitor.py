"""HealthMonitor over in-memory ports and a hand-moved clock: observations, reports, transitions, metrics."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from meshcore.errors import Unavailable
from services.health.logic import HealthStatus, ReasonCode, ServingStatus, Thresholds
from services.health.metrics import HealthMetrics
from services.health.monitor import HealthMonitor, ServiceTarget
from services.health.watch import WatchHub
from tests.unit.health.health_fakes import (
    REFUSED,
    T0,
    TIMED_OUT,
    Clock,
    FakeEdgePeer,
    FakeHealthCheck,
    node_id,
    peers,
)

ARCHIVE = "mailmesh.archive.v1.ArchiveService"


def make(
    edges: list[FakeEdgePeer],
    archive: FakeHealthCheck,
    *others: ServiceTarget,
    hold_s: float = 3.0,
    registry: CollectorRegistry | None = None,
) -> tuple[HealthMonitor, Clock]:
    clock = Clock()
    metrics = HealthMetrics(registry) if registry is not None else None
    hub = WatchHub()
    if metrics is not None:
        metrics.follow_watchers(hub)
    monitor = HealthMonitor(
        edges,
        [ServiceTarget("archive", ARCHIVE, archive, affects_status=True), *others],
        Thresholds(hold_s=hold_s),
        hub=hub,
        observer=metrics,
        clock=clock,
    )
    return monitor, clock


async def test_a_report_carries_every_observation() -> None:
    first = FakeEdgePeer("e:1", "edge-a", node_id(100), peers([1, 2, 3]))
    second = FakeEdgePeer("e:2", "edge-b", node_id(200), {**peers([3, 4]), **peers([5], "shh/6")})
    ingest = FakeHealthCheck("i:1", ServingStatus.NOT_SERVING)
    archive = FakeHealthCheck("a:1")
    monitor, _ = make(
        [first, second], archive, ServiceTarget("ingest", "mailmesh.ingest.v1.IngestService", ingest)
    )
    report = await monitor.evaluate()
    assert report.status is HealthStatus.MINIMALLY_HEALTHY and report.evaluated_status is report.status
    assert report.status_since == T0 and report.evaluated_at == T0 and report.pending_since is None
    a = report.assessment
    assert a.peer_count == 5
    assert [(e.observation.instance, e.observation.node_id, e.peer_count) for e in a.edge_peers] == [
        ("edge-a", node_id(100), 3),
        ("edge-b", node_id(200), 3),
    ]
    assert a.edge_peers[1].peers_by_capability == (("shh/6", 1), ("waku/1", 2))
    assert [(s.service, s.status, s.affects_status) for s in a.services] == [
        ("archive", ServingStatus.SERVING, True),
        ("ingest", ServingStatus.NOT_SERVING, False),
    ]
    assert archive.asked == [ARCHIVE] and ingest.asked == ["mailmesh.ingest.v1.IngestService"]
    assert [r.code for r in a.reasons] == [ReasonCode.BELOW_HEALTHY_PEERS, ReasonCode.SERVICE_NOT_SERVING]


async def test_failing_targets_are_observed_as_unreachable_with_their_error() -> None:
    down = FakeEdgePeer("e:2", fail=TIMED_OUT)
    archive = FakeHealthCheck("a:1", fail=REFUSED)
    monitor, _ = make([FakeEdgePeer("e:1", peers=peers(range(6))), down], archive)
    report = await monitor.evaluate()
    a = report.assessment
    assert report.status is HealthStatus.UNHEALTHY and a.loss and a.peer_count == 6
    assert (
        not a.edge_peers[1].observation.reachable and a.edge_peers[1].observation.error == "Deadline Exceeded"
    )
    assert a.services[0].status is ServingStatus.UNREACHABLE and "connection refused" in a.services[0].error
    assert [r.code for r in a.reasons] == [ReasonCode.ARCHIVE_UNAVAILABLE, ReasonCode.EDGE_PEER_UNREACHABLE]


async def test_current_waits_for_the_first_evaluation() -> None:
    monitor, _ = make([FakeEdgePeer("e:1")], FakeHealthCheck("a:1"))
    assert monitor.latest is None
    waiting = asyncio.ensure_future(monitor.current())
    await asyncio.sleep(0)  # let it start waiting: it must still be pending, there is nothing to report
    assert not waiting.done()
    evaluated = await monitor.evaluate()
    assert await waiting is evaluated and monitor.latest is evaluated


async def test_transitions_reach_watchers_and_metrics_in_order() -> None:
    registry = CollectorRegistry()
    edge_peer = FakeEdgePeer("e:1", peers=peers(range(6)))
    monitor, clock = make([edge_peer], FakeHealthCheck("a:1"), hold_s=1.0, registry=registry)
    await monitor.evaluate()
    stream = monitor.watch(any_change=False)
    assert registry.get_sample_value("mailmesh_health_watchers") == 1
    edge_peer.peers = {}
    clock.advance(1)
    await monitor.evaluate()  # zero peers: Unhealthy at once
    edge_peer.peers = peers(range(4))
    for _ in range(2):
        clock.advance(1)
        await monitor.evaluate()  # MinimallyHealthy once it held 1 s
    updates = [await anext(stream) for _ in range(3)]
    assert [(u.previous, u.report.status) for u in updates] == [
        (None, HealthStatus.HEALTHY),
        (HealthStatus.HEALTHY, HealthStatus.UNHEALTHY),
        (HealthStatus.UNHEALTHY, HealthStatus.MINIMALLY_HEALTHY),
    ]
    stream.close()

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert sample("mailmesh_health_status", status="MinimallyHealthy") == 1
    assert sample("mailmesh_health_status", status="Healthy") == 0
    assert sample("mailmesh_health_status", status="Unhealthy") == 0
    assert sample("mailmesh_health_transitions_total", **{"from": "Healthy", "to": "Unhealthy"}) == 1
    assert sample("mailmesh_health_transitions_total", **{"from": "Unhealthy", "to": "MinimallyHealthy"}) == 1
    assert sample("mailmesh_health_peers") == 4
    assert sample("mailmesh_health_edge_peers") == 1 and sample("mailmesh_health_edge_peers_reachable") == 1
    assert sample("mailmesh_health_service_serving", service="archive", target="a:1") == 1
    assert sample("mailmesh_health_evaluation_seconds_count") == 4
    assert sample("mailmesh_health_watchers") == 0


async def test_the_loop_evaluates_until_stopped_and_stop_ends_the_watchers() -> None:
    edge_peer = FakeEdgePeer("e:1", peers=peers(range(6)))
    monitor, _ = make([edge_peer], FakeHealthCheck("a:1"))
    monitor.start(0.01)
    await monitor.current()
    stream = monitor.watch(any_change=False)
    first = await anext(stream)
    assert first.report.status is HealthStatus.HEALTHY
    assert any(t.get_name() == "health-monitor" for t in asyncio.all_tasks())
    await monitor.stop()
    with pytest.raises(Unavailable):
        await anext(stream)
    assert edge_peer.calls >= 1
    assert not any(t.get_name() == "health-monitor" for t in asyncio.all_tasks())
