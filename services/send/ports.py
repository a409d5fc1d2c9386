"""What the engine calls and tells: the outcome of a publish, and protocols the gRPC clients and the metrics
implement (tests may pass fakes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from msgstore.types import OutboxEntry, SendState

if TYPE_CHECKING:  # schedule imports PublishOutcome from here
    from services.send.schedule import RetryPolicy

__all__ = [
    "FORWARDED",
    "EngineObserver",
    "EngineSettings",
    "PublishOutcome",
    "Publisher",
    "ReplicaCalls",
    "StoreChecker",
]

#: gRPC metadata key on a Cancel/Resend one replica forwards to another; its value names the forwarder. The
#: receiver never forwards such a call again (it answers NOT_OWNER if it no longer owns the shard).
FORWARDED = "mailmesh-forwarded-by"


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    """One attempt's publish through every edge peer, summed."""

    envelope_hash: bytes
    relayed_to: int
    """Waku peers holding the envelope, over every edge peer; >= 1 means sent."""
    rejected_fault: int = 0
    """Set when every edge peer that answered refused the envelope (an EnvelopeFault number)."""
    detail: str = ""
    """Why the attempt failed (no peer, unreachable edge peers, refusal), for the record's error."""


class Publisher(Protocol):
    """Publishes one envelope through every edge peer (services.send.clients.EdgePeers)."""

    async def publish(self, raw: bytes, envelope_hash: bytes, *, ephemeral: bool) -> PublishOutcome:
        """The summed outcome; never raises for an unreachable edge peer (it counts as no peer). The
        current span (the attempt's) is the envelope's trace context on the edge peers."""
        ...

    async def pow_target(self) -> float:
        """The highest PoW any connected Waku peer (or edge peer) requires."""
        ...


class StoreChecker(Protocol):
    """Whether the store holds a request's latest envelope: the mesh's archive (HistoryQueryService.Lookup)
    or, with ``MSGAPI_STORE_NODES``, external mailservers (services.send.storenodes)."""

    async def holds(self, entry: OutboxEntry) -> bool:
        """True when the store holds ``entry.envelope_hash``; raises meshcore errors when it cannot tell."""
        ...


class ReplicaCalls(Protocol):
    """Cancel and Resend on another send replica (services.send.clients.SendReplicas)."""

    async def cancel(self, address: str, request_id: str) -> tuple[bool, SendState]:
        """(canceled, state after) as the replica at ``address`` answered; meshcore errors otherwise."""
        ...

    async def resend(self, address: str, request_id: str) -> tuple[bool, SendState]:
        """(rescheduled, state after) as the replica at ``address`` answered; meshcore errors otherwise."""
        ...


class EngineObserver(Protocol):
    """Receives what the metrics count (services.send.metrics.SendMetrics)."""

    def changed(self, before: OutboxEntry | None, after: OutboxEntry) -> None:
        """A change was saved."""

    def owned(self, shards: int, pending: int, paused: bool) -> None:
        """Gauges after each scheduling pass."""


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """How the engine runs (SEND_* variables)."""

    policy: RetryPolicy
    """Attempts, backoff and the store-check delay."""
    max_in_flight: int = 64
    """Attempts running at once at most."""
    lease_ttl_s: float = 10.0
    """Outbox shard lease lifetime."""
    adopt_interval_s: float = 1.0
    """Seconds between reads of the owned shards' open requests."""
