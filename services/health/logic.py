"""Node health as the Messaging API defines it, evaluated from one round of observations (pure).

MESSAGING-API "Health Indicator" defines three states by connectivity: Unhealthy (no peer), MinimallyHealthy
(a relay mesh of at least four peers), Healthy (at least six). Mailmesh is a Waku v1 node, so the "relay mesh"
is the set of Waku peers connected to its edge peers, counted once per node ID across every edge-peer
instance (a peer connected to two instances is one peer), and the archive is part of the node: without it
nothing sent can be confirmed as stored, so the node is Unhealthy while no archive replica is SERVING.
Edge peers of the mesh itself that happen to be connected to each other are not counted: they give no
connectivity to the network. Other services' ``grpc.health.v1`` statuses are reported for information only.

:func:`assess` gives the level one round of observations supports; :mod:`services.health.hysteresis` decides
when the reported status follows it. Times are UNIX seconds (floats) from an injected clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = [
    "EDGE_PEER",
    "MAX_DETAIL_BYTES",
    "Assessment",
    "ConnectionStatus",
    "EdgePeerHealth",
    "EdgePeerObservation",
    "HealthReport",
    "HealthStatus",
    "Reason",
    "ReasonCode",
    "ServiceObservation",
    "ServingStatus",
    "Thresholds",
    "assess",
    "connection_status",
    "status_name",
]

#: HealthReason.detail is at most 256 bytes (health.proto).
MAX_DETAIL_BYTES = 256
#: ServiceObservation.service of the edge peers' own grpc.health.v1 checks.
EDGE_PEER = "edge-peer"


class HealthStatus(IntEnum):
    """MESSAGING-API "Health Indicator" states, ordered: a higher value is healthier
    (numbers as common.proto)."""

    UNHEALTHY = 1
    MINIMALLY_HEALTHY = 2
    HEALTHY = 3


class ConnectionStatus(IntEnum):
    """The newer WAKU-API names of the same states (waku-api.md ``ConnectionStatus``)."""

    DISCONNECTED = 1
    PARTIALLY_CONNECTED = 2
    CONNECTED = 3


_CONNECTION = {
    HealthStatus.UNHEALTHY: ConnectionStatus.DISCONNECTED,
    HealthStatus.MINIMALLY_HEALTHY: ConnectionStatus.PARTIALLY_CONNECTED,
    HealthStatus.HEALTHY: ConnectionStatus.CONNECTED,
}


def connection_status(status: HealthStatus) -> ConnectionStatus:
    """WAKU-API's name for ``status``, one to one: clients of either vocabulary see the same changes.

    Unhealthy ↔ Disconnected, MinimallyHealthy ↔ PartiallyConnected, Healthy ↔ Connected.
    """
    return _CONNECTION[status]


_SPEC_NAMES = {
    HealthStatus.UNHEALTHY: "Unhealthy",
    HealthStatus.MINIMALLY_HEALTHY: "MinimallyHealthy",
    HealthStatus.HEALTHY: "Healthy",
}


def status_name(status: HealthStatus) -> str:
    """The spec's spelling: "Unhealthy", "MinimallyHealthy", "Healthy"
    (MESSAGING-API "Health Indicator", REST)."""
    return _SPEC_NAMES[status]


class ServingStatus(IntEnum):
    """A target's ``grpc.health.v1`` answer (numbers 0-3 as there), or UNREACHABLE when Check failed."""

    UNKNOWN = 0
    SERVING = 1
    NOT_SERVING = 2
    SERVICE_UNKNOWN = 3
    UNREACHABLE = 4


class ReasonCode(IntEnum):
    """Why the level is what it is (numbers as health.proto HealthReasonCode)."""

    NO_PEERS = 1
    BELOW_MINIMAL_PEERS = 2
    BELOW_HEALTHY_PEERS = 3
    ARCHIVE_UNAVAILABLE = 4
    EDGE_PEER_UNREACHABLE = 5
    SERVICE_NOT_SERVING = 6


@dataclass(frozen=True)
class Reason:
    """One reason, with a human-readable detail of at most :data:`MAX_DETAIL_BYTES` bytes."""

    code: ReasonCode
    detail: str

    @classmethod
    def of(cls, code: ReasonCode, detail: str) -> Reason:
        """A reason whose detail is cut (on a character boundary) to fit the proto's limit."""
        raw = detail.encode()
        if len(raw) > MAX_DETAIL_BYTES:
            detail = raw[: MAX_DETAIL_BYTES - 3].decode(errors="ignore") + "..."
        return cls(code, detail)


@dataclass(frozen=True)
class Thresholds:
    """Peer counts per level and the hysteresis dwell times (seconds) in force."""

    minimally_healthy_peers: int = 4
    healthy_peers: int = 6
    hold_s: float = 3.0
    loss_hold_s: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.minimally_healthy_peers <= self.healthy_peers:
            raise ValueError("need 1 <= minimally_healthy_peers <= healthy_peers")
        if not 0 <= self.loss_hold_s <= self.hold_s:
            raise ValueError("need 0 <= loss_hold_s <= hold_s")

    def level(self, peers: int) -> HealthStatus:
        """The level ``peers`` distinct peers support when the archive is available."""
        if peers >= self.healthy_peers:
            return HealthStatus.HEALTHY
        if peers >= self.minimally_healthy_peers:
            return HealthStatus.MINIMALLY_HEALTHY
        return HealthStatus.UNHEALTHY


@dataclass(frozen=True)
class EdgePeerObservation:
    """What one edge-peer instance said (NodeInfo + ListPeers), or why it could not be asked."""

    target: str
    checked_at: float
    reachable: bool
    instance: str = ""
    node_id: bytes = b""
    peers: Mapping[bytes, str] = field(default_factory=dict)
    """Connected Waku peers: node ID → negotiated capability ("waku/1", "waku/0", "shh/6")."""
    error: str = ""


@dataclass(frozen=True)
class ServiceObservation:
    """One target's ``grpc.health.v1`` status."""

    service: str
    """Mesh service name: "edge-peer", "ingest", "archive", "history-query", "send" or "subscription"."""
    target: str
    grpc_service: str
    status: ServingStatus
    checked_at: float
    affects_status: bool = False
    error: str = ""


@dataclass(frozen=True)
class EdgePeerHealth:
    """An edge-peer instance as reported: its peers counted without the mesh's own instances."""

    observation: EdgePeerObservation
    peer_count: int
    peers_by_capability: tuple[tuple[str, int], ...]
    """Sorted (capability, count) pairs."""


@dataclass(frozen=True)
class Assessment:
    """The level one round of observations supports, and everything a report shows about it."""

    level: HealthStatus
    loss: bool
    """True when the level is Unhealthy because no peer or no archive is left (hysteresis' fast path)."""
    peer_count: int
    edge_peers: tuple[EdgePeerHealth, ...]
    services: tuple[ServiceObservation, ...]
    reasons: tuple[Reason, ...]


def _counted_edge_peers(
    observations: tuple[EdgePeerObservation, ...],
) -> tuple[tuple[EdgePeerHealth, ...], frozenset[bytes]]:
    own = {o.node_id for o in observations if o.reachable and o.node_id}
    edges: list[EdgePeerHealth] = []
    distinct: set[bytes] = set()
    for o in observations:
        counted = {pid: cap for pid, cap in o.peers.items() if pid not in own} if o.reachable else {}
        distinct.update(counted)
        by_cap = tuple(sorted(Counter(counted.values()).items()))
        edges.append(EdgePeerHealth(o, len(counted), by_cap))
    return tuple(edges), frozenset(distinct)


def _service_label(s: ServiceObservation) -> str:
    state = s.status.name if s.status is not ServingStatus.UNREACHABLE else "unreachable"
    return f"{s.service} {s.target}: {state}" + (f": {s.error}" if s.error else "")


def assess(
    edge_peers: tuple[EdgePeerObservation, ...],
    services: tuple[ServiceObservation, ...],
    thresholds: Thresholds,
) -> Assessment:
    """The level the observations support, the distinct peer count and the reasons (status-lowering first)."""
    edges, distinct = _counted_edge_peers(edge_peers)
    peers = len(distinct)
    archives = [s for s in services if s.affects_status]
    archive_ok = any(s.status is ServingStatus.SERVING for s in archives)
    reasons: list[Reason] = []
    reachable = sum(1 for o in edge_peers if o.reachable)
    if peers == 0:
        detail = f"no Waku peer on any edge peer ({reachable} of {len(edge_peers)} edge peers reachable)"
        reasons.append(Reason.of(ReasonCode.NO_PEERS, detail))
    elif peers < thresholds.minimally_healthy_peers:
        detail = f"{peers} peers, {thresholds.minimally_healthy_peers} needed for MinimallyHealthy"
        reasons.append(Reason.of(ReasonCode.BELOW_MINIMAL_PEERS, detail))
    elif peers < thresholds.healthy_peers:
        detail = f"{peers} peers, {thresholds.healthy_peers} needed for Healthy"
        reasons.append(Reason.of(ReasonCode.BELOW_HEALTHY_PEERS, detail))
    if not archive_ok:
        detail = "; ".join(_service_label(s) for s in archives) or "no archive configured"
        reasons.append(Reason.of(ReasonCode.ARCHIVE_UNAVAILABLE, detail))
    for o in edge_peers:
        if not o.reachable:
            reasons.append(Reason.of(ReasonCode.EDGE_PEER_UNREACHABLE, f"edge peer {o.target}: {o.error}"))
    # An edge peer that did not answer is already EDGE_PEER_UNREACHABLE; its Check failing says nothing more.
    silent = {o.target for o in edge_peers if not o.reachable}
    for s in services:
        if s.status is ServingStatus.SERVING or (s.service == EDGE_PEER and s.target in silent):
            continue
        # One archive replica down while another serves is information, like any other service.
        if archive_ok or not s.affects_status:
            reasons.append(Reason.of(ReasonCode.SERVICE_NOT_SERVING, _service_label(s)))
    loss = peers == 0 or not archive_ok
    level = HealthStatus.UNHEALTHY if loss else thresholds.level(peers)
    return Assessment(level, loss, peers, edges, services, tuple(reasons))


@dataclass(frozen=True)
class HealthReport:
    """What GetHealth and WatchHealth report: the status after hysteresis and the evaluation behind it."""

    status: HealthStatus
    status_since: float
    evaluated_at: float
    evaluated_status: HealthStatus
    pending_since: float | None
    assessment: Assessment
    thresholds: Thresholds

    @property
    def connection_status(self) -> ConnectionStatus:
        """``status`` in WAKU-API's vocabulary."""
        return connection_status(self.status)

    def fingerprint(self) -> tuple[object, ...]:
        """Everything a watcher of "any change" cares about: the report without its timestamps."""
        a = self.assessment
        edges = tuple(
            (
                e.observation.target,
                e.observation.instance,
                e.observation.node_id,
                e.observation.reachable,
                e.peer_count,
                e.peers_by_capability,
                e.observation.error,
            )
            for e in a.edge_peers
        )
        services = tuple((s.service, s.target, s.status, s.error) for s in a.services)
        return (self.status, self.evaluated_status, a.peer_count, edges, services, a.reasons)
