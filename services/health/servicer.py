"""mailmesh.health.v1.HealthService: proto ⇄ domain translation only.

GetHealth answers with the latest report (waiting for the first evaluation right after start, so it never
answers "not evaluated"); WatchHealth streams :class:`~services.health.watch.WatchUpdate` s. Errors are
:mod:`meshcore.errors` categories mapped by the server's interceptor: an unknown watch mode is
INVALID_ARGUMENT, a watcher that fell too far behind RESOURCE_EXHAUSTED, shutdown UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from mailmesh.common.v1 import common_pb2
from mailmesh.health.v1 import health_pb2, health_pb2_grpc
from meshcore.errors import InvalidArgument
from meshcore.protoconv import duration, timestamp
from services.health.logic import EdgePeerHealth, HealthReport, HealthStatus, ServiceObservation, Thresholds
from services.health.monitor import HealthMonitor
from services.health.watch import WatchUpdate

__all__ = ["SERVICE_NAME", "HealthServicer", "to_proto"]

SERVICE_NAME = "mailmesh.health.v1.HealthService"
_ANY_CHANGE = {
    health_pb2.WATCH_MODE_UNSPECIFIED: False,
    health_pb2.WATCH_MODE_STATUS: False,
    health_pb2.WATCH_MODE_ANY: True,
}


def _status(status: HealthStatus | None) -> common_pb2.HealthStatus.ValueType:
    # Domain and proto enums share their numbers (common.proto HealthStatus); None is UNSPECIFIED.
    return common_pb2.HealthStatus.ValueType(0 if status is None else int(status))


def _edge_peer(e: EdgePeerHealth) -> health_pb2.EdgePeerHealth:
    o = e.observation
    return health_pb2.EdgePeerHealth(
        instance=o.instance,
        target=o.target,
        node_id=o.node_id,
        reachable=o.reachable,
        peer_count=e.peer_count,
        peers_by_capability=dict(e.peers_by_capability),
        error=o.error,
        checked_at=timestamp(o.checked_at),
    )


def _service(s: ServiceObservation) -> health_pb2.ServiceHealth:
    return health_pb2.ServiceHealth(
        service=s.service,
        target=s.target,
        grpc_service=s.grpc_service,
        status=health_pb2.ServingStatus.ValueType(int(s.status)),
        error=s.error,
        checked_at=timestamp(s.checked_at),
        affects_status=s.affects_status,
    )


def _thresholds(t: Thresholds) -> health_pb2.HealthThresholds:
    return health_pb2.HealthThresholds(
        minimally_healthy_peers=t.minimally_healthy_peers,
        healthy_peers=t.healthy_peers,
        hold=duration(t.hold_s),
        loss_hold=duration(t.loss_hold_s),
    )


def to_proto(report: HealthReport) -> health_pb2.HealthReport:
    """The HealthReport message of a domain report."""
    a = report.assessment
    message = health_pb2.HealthReport(
        status=_status(report.status),
        status_since=timestamp(report.status_since),
        evaluated_at=timestamp(report.evaluated_at),
        peer_count=a.peer_count,
        edge_peers=[_edge_peer(e) for e in a.edge_peers],
        services=[_service(s) for s in a.services],
        reasons=[
            health_pb2.HealthReason(code=health_pb2.HealthReasonCode.ValueType(int(r.code)), detail=r.detail)
            for r in a.reasons
        ],
        thresholds=_thresholds(report.thresholds),
        connection_status=common_pb2.ConnectionStatus.ValueType(int(report.connection_status)),
        evaluated_status=_status(report.evaluated_status),
    )
    if report.pending_since is not None:
        message.pending_since.CopyFrom(timestamp(report.pending_since))
    return message


def _update(update: WatchUpdate) -> health_pb2.WatchHealthResponse:
    return health_pb2.WatchHealthResponse(
        report=to_proto(update.report),
        previous_status=_status(update.previous),
        status_changed=update.status_changed,
    )


class HealthServicer(health_pb2_grpc.HealthServiceServicer):
    """GetHealth and WatchHealth over a :class:`HealthMonitor`."""

    def __init__(self, monitor: HealthMonitor) -> None:
        self._monitor = monitor

    async def GetHealth(  # noqa: N802 - gRPC method name
        self, request: health_pb2.GetHealthRequest, context: Any
    ) -> health_pb2.GetHealthResponse:
        """The latest report."""
        return health_pb2.GetHealthResponse(report=to_proto(await self._monitor.current()))

    async def WatchHealth(  # noqa: N802 - gRPC method name
        self, request: health_pb2.WatchHealthRequest, context: Any
    ) -> AsyncIterator[health_pb2.WatchHealthResponse]:
        """The current report, then one per status change (or any change; health.proto WatchMode)."""
        any_change = _ANY_CHANGE.get(request.mode)
        if any_change is None:
            raise InvalidArgument(f"unknown watch mode {request.mode}", {"field": "mode"})
        stream = self._monitor.watch(any_change=any_change)
        try:
            async for update in stream:
                yield _update(update)
        finally:
            stream.close()
