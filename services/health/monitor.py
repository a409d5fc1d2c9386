"""The evaluation loop: ask every edge peer and service, assess, apply hysteresis, publish.

Each evaluation queries every target concurrently, each call under its own deadline (set by the ports in
``clients.py``), so one hung target costs at most that deadline and never stalls the others. A target that
fails is observed as unreachable with the error text: an edge peer then counts 0 peers, a service counts as
UNREACHABLE (MESSAGING-API "Health Indicator" judges connectivity; a peer count we cannot read is no
connectivity we can rely on). The loop runs at a fixed rate; an evaluation that overruns the interval is
followed by the next at once rather than by a burst of catch-up evaluations.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from meshcore.errors import MeshError
from meshcore.logging import trim
from services.health.hysteresis import HealthStateMachine, Transition
from services.health.logic import (
    EdgePeerObservation,
    HealthReport,
    ServiceObservation,
    ServingStatus,
    Thresholds,
    assess,
    status_name,
)
from services.health.watch import WatchHub, WatchStream

__all__ = ["EdgePeerPort", "HealthCheckPort", "HealthMonitor", "MonitorObserver", "ServiceTarget"]

_log = logging.getLogger(__name__)
#: Longest error text kept in an observation (the report's detail fields are bounded by the proto).
_MAX_ERROR_CHARS = 200


class EdgePeerPort(Protocol):
    """One edge-peer instance (EdgePeerService.NodeInfo and ListPeers); failures raise MeshError."""

    @property
    def target(self) -> str:
        """The instance's gRPC target, ``host:port``."""
        ...

    async def node_info(self) -> tuple[str, bytes]:
        """(instance name, node ID)."""
        ...

    async def list_peers(self) -> Mapping[bytes, str]:
        """Connected Waku peers: node ID → negotiated capability."""
        ...


class HealthCheckPort(Protocol):
    """One target's ``grpc.health.v1.Health/Check``; failures to get an answer raise MeshError."""

    @property
    def target(self) -> str:
        """The gRPC target, ``host:port``."""
        ...

    async def check(self, grpc_service: str) -> ServingStatus:
        """The serving status of ``grpc_service`` there (SERVICE_UNKNOWN when it is not registered)."""
        ...


@dataclass(frozen=True)
class ServiceTarget:
    """A service replica to check: its mesh name, the gRPC service name to ask about, and where."""

    service: str
    grpc_service: str
    port: HealthCheckPort
    affects_status: bool = False


class MonitorObserver(Protocol):
    """Receives what each evaluation found (the metrics implement it)."""

    def evaluated(self, report: HealthReport, seconds: float) -> None:
        """One evaluation finished in ``seconds``."""
        ...

    def transition(self, transition: Transition) -> None:
        """The reported status changed."""
        ...


def _error_text(err: MeshError) -> str:
    return trim(err.message, _MAX_ERROR_CHARS)


class HealthMonitor:
    """Evaluates node health now and then, keeps the latest report and feeds the watch streams."""

    def __init__(
        self,
        edge_peers: Sequence[EdgePeerPort],
        services: Sequence[ServiceTarget],
        thresholds: Thresholds,
        *,
        hub: WatchHub | None = None,
        observer: MonitorObserver | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._edge_peers = tuple(edge_peers)
        self._services = tuple(services)
        self._thresholds = thresholds
        self._machine = HealthStateMachine(hold_s=thresholds.hold_s, loss_hold_s=thresholds.loss_hold_s)
        self.hub = hub if hub is not None else WatchHub()
        """Where reports go to WatchHealth streams."""
        self._observer = observer
        self._clock = clock
        self._latest: HealthReport | None = None
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def latest(self) -> HealthReport | None:
        """The latest report, None before the first evaluation."""
        return self._latest

    async def current(self) -> HealthReport:
        """The latest report, waiting for the first evaluation if there has been none yet."""
        await self._ready.wait()
        assert self._latest is not None
        return self._latest

    def watch(self, *, any_change: bool) -> WatchStream:
        """WatchHealth's updates (see :meth:`WatchHub.watch`)."""
        return self.hub.watch(any_change=any_change)

    def set_targets(self, edge_peers: Sequence[EdgePeerPort], services: Sequence[ServiceTarget]) -> None:
        """Query these from the next evaluation on (the instances behind a DNS name changed)."""
        self._edge_peers = tuple(edge_peers)
        self._services = tuple(services)

    async def evaluate(self) -> HealthReport:
        """Run one evaluation: observe every target, assess, apply hysteresis, publish the report."""
        started = time.perf_counter()
        edges, services = await asyncio.gather(
            asyncio.gather(*(self._observe_edge(p) for p in self._edge_peers)),
            asyncio.gather(*(self._observe_service(s) for s in self._services)),
        )
        now = self._clock()
        assessment = assess(tuple(edges), tuple(services), self._thresholds)
        transition = self._machine.observe(assessment.level, loss=assessment.loss, now=now)
        status = self._machine.status
        assert status is not None
        report = HealthReport(
            status=status,
            status_since=self._machine.status_since,
            evaluated_at=now,
            evaluated_status=assessment.level,
            pending_since=self._machine.pending_since,
            assessment=assessment,
            thresholds=self._thresholds,
        )
        self._latest = report
        self._ready.set()
        self.hub.publish(report, transition, now)
        if transition is not None:
            self._log_transition(transition, report)
        if self._observer is not None:
            if transition is not None:
                self._observer.transition(transition)
            self._observer.evaluated(report, time.perf_counter() - started)
        return report

    def start(self, interval_s: float) -> None:
        """Evaluate every ``interval_s`` seconds in a background task until :meth:`stop`."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(interval_s), name="health-monitor")

    async def stop(self) -> None:
        """End the watch streams and the evaluation loop."""
        self.hub.close()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if (current := asyncio.current_task()) is not None and current.cancelling():
                    raise

    async def _run(self, interval_s: float) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            try:
                await self.evaluate()
            except Exception:
                # A bug in one evaluation must not end health reporting; the next one may succeed.
                _log.exception("health evaluation failed")
            next_at = max(next_at + interval_s, loop.time())
            await asyncio.sleep(next_at - loop.time())

    async def _observe_edge(self, port: EdgePeerPort) -> EdgePeerObservation:
        try:
            (instance, node_id), peers = await asyncio.gather(port.node_info(), port.list_peers())
        except MeshError as err:
            return EdgePeerObservation(port.target, self._clock(), False, error=_error_text(err))
        return EdgePeerObservation(port.target, self._clock(), True, instance, node_id, dict(peers))

    async def _observe_service(self, target: ServiceTarget) -> ServiceObservation:
        error = ""
        try:
            status = await target.port.check(target.grpc_service)
        except MeshError as err:
            status, error = ServingStatus.UNREACHABLE, _error_text(err)
        return ServiceObservation(
            target.service,
            target.port.target,
            target.grpc_service,
            status,
            self._clock(),
            target.affects_status,
            error,
        )

    def _log_transition(self, transition: Transition, report: HealthReport) -> None:
        previous = status_name(transition.previous) if transition.previous is not None else "none"
        reasons = "; ".join(r.detail for r in report.assessment.reasons) or "all criteria met"
        _log.info(
            "health %s -> %s (%d peers): %s",
            previous,
            status_name(transition.status),
            report.assessment.peer_count,
            reasons,
            extra={"health_status": status_name(transition.status), "peers": report.assessment.peer_count},
        )
