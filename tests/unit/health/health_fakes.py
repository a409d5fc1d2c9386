"""Builders for health observations, a manual clock and in-memory edge-peer / health-check ports."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from meshcore.errors import DeadlineExceeded, MeshError, Unavailable
from services.health.logic import (
    EdgePeerObservation,
    ServiceObservation,
    ServingStatus,
)

T0 = 1_700_000_000.0


def node_id(n: int) -> bytes:
    """A distinct 32-byte node ID per ``n``."""
    return n.to_bytes(32, "big")


def peers(ids: Iterable[int], capability: str = "waku/1") -> dict[bytes, str]:
    return {node_id(i): capability for i in ids}


def edge(
    target: str, ids: Iterable[int] = (), *, own: int | None = None, capability: str = "waku/1"
) -> EdgePeerObservation:
    """A reachable edge peer at ``target`` (node ID ``own``, default derived from the target) with peers."""
    own_id = node_id(own) if own is not None else hashlib.sha256(target.encode()).digest()
    return EdgePeerObservation(target, T0, True, f"edge-{target}", own_id, peers(ids, capability))


def unreachable_edge(target: str, error: str = "connection refused") -> EdgePeerObservation:
    return EdgePeerObservation(target, T0, False, error=error)


def archive(
    status: ServingStatus = ServingStatus.SERVING, target: str = "a:1", error: str = ""
) -> ServiceObservation:
    return ServiceObservation(
        "archive", target, "mailmesh.archive.v1.ArchiveService", status, T0, affects_status=True, error=error
    )


def service(name: str, status: ServingStatus, target: str = "s:1") -> ServiceObservation:
    return ServiceObservation(name, target, f"mailmesh.{name}.v1.X", status, T0)


@dataclass
class Clock:
    """A clock tests move by hand."""

    now: float = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


@dataclass
class FakeEdgePeer:
    """An EdgePeerPort whose answers the test sets; ``fail`` makes both calls raise it."""

    target: str
    instance: str = "edge-0"
    own_id: bytes = field(default_factory=lambda: node_id(9_999))
    peers: Mapping[bytes, str] = field(default_factory=dict)
    fail: MeshError | None = None
    calls: int = 0

    async def node_info(self) -> tuple[str, bytes]:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return self.instance, self.own_id

    async def list_peers(self) -> Mapping[bytes, str]:
        if self.fail is not None:
            raise self.fail
        return dict(self.peers)


@dataclass
class FakeHealthCheck:
    """A HealthCheckPort answering ``status``, or raising ``fail``."""

    target: str
    status: ServingStatus = ServingStatus.SERVING
    fail: MeshError | None = None
    asked: list[str] = field(default_factory=list)

    async def check(self, grpc_service: str) -> ServingStatus:
        self.asked.append(grpc_service)
        if self.fail is not None:
            raise self.fail
        return self.status


REFUSED = Unavailable("failed to connect to all addresses; connection refused")
TIMED_OUT = DeadlineExceeded("Deadline Exceeded")
