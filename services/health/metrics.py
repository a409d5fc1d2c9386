"""The health service's domain metrics, declared in one place (``mailmesh_health_*``; status-go has none).

``mailmesh_health_status{status}`` has one series per state, 1 for the current one and 0 for the others, so
``mailmesh_health_status{status="Unhealthy"} == 1`` is an alert and a graph of the three shows the history.
Transitions count real changes only: the first evaluation sets the status and is not a transition.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from meshcore.metrics import PerRegistry
from services.health.hysteresis import Transition
from services.health.logic import HealthReport, HealthStatus, ServingStatus, status_name
from services.health.watch import WatchHub

__all__ = ["HealthMetrics"]

_EVALUATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class HealthMetrics(PerRegistry):
    """The metric set in one registry; implements ``monitor.MonitorObserver``."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.status = Gauge(
            "mailmesh_health_status",
            "Node health (MESSAGING-API Health Indicator): 1 for the current status, 0 for the others.",
            ("status",),
            registry=registry,
        )
        self.peers = Gauge(
            "mailmesh_health_peers",
            "Distinct Waku peers across the reachable edge peers (the mesh's own instances not counted).",
            registry=registry,
        )
        self.edge_peers = Gauge(
            "mailmesh_health_edge_peers", "Edge-peer instances queried per evaluation.", registry=registry
        )
        self.edge_peers_reachable = Gauge(
            "mailmesh_health_edge_peers_reachable",
            "Edge-peer instances that answered NodeInfo and ListPeers in the latest evaluation.",
            registry=registry,
        )
        self.service_serving = Gauge(
            "mailmesh_health_service_serving",
            "1 when the target answered grpc.health.v1 SERVING in the latest evaluation, else 0.",
            ("service", "target"),
            registry=registry,
        )
        self.transitions = Counter(
            "mailmesh_health_transitions_total",
            "Status changes, by previous and new status.",
            ("from", "to"),
            registry=registry,
        )
        self.evaluation_seconds = Histogram(
            "mailmesh_health_evaluation_seconds",
            "Time one evaluation took (every edge peer and service queried concurrently).",
            registry=registry,
            buckets=_EVALUATION_BUCKETS,
        )
        self.watchers = Gauge("mailmesh_health_watchers", "Open WatchHealth streams.", registry=registry)
        self._service_labels: set[tuple[str, str]] = set()

    def follow_watchers(self, hub: WatchHub) -> None:
        """Report ``hub``'s open streams as ``mailmesh_health_watchers`` (read at scrape time)."""
        self.watchers.set_function(lambda: hub.watchers)

    def evaluated(self, report: HealthReport, seconds: float) -> None:
        """Record one evaluation."""
        for status in HealthStatus:
            self.status.labels(status_name(status)).set(1 if status is report.status else 0)
        a = report.assessment
        self.peers.set(a.peer_count)
        self.edge_peers.set(len(a.edge_peers))
        self.edge_peers_reachable.set(sum(1 for e in a.edge_peers if e.observation.reachable))
        checked = {(s.service, s.target) for s in a.services}
        # An instance behind a DNS name that is gone (a replaced pod) leaves no series saying it serves.
        for labels in self._service_labels - checked:
            self.service_serving.remove(*labels)
        self._service_labels = checked
        for s in a.services:
            self.service_serving.labels(s.service, s.target).set(
                1 if s.status is ServingStatus.SERVING else 0
            )
        self.evaluation_seconds.observe(seconds)

    def transition(self, transition: Transition) -> None:
        """Count a status change (the first evaluation's setting is not one)."""
        if transition.previous is not None:
            self.transitions.labels(status_name(transition.previous), status_name(transition.status)).inc()
