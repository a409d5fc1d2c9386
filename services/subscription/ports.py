"""What the followers need from other services, as protocols over domain values (clients.py implements them
over gRPC; unit tests over fakes)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from msgstore.types import HealthStatus
from services.subscription.rules import SendUpdate

__all__ = ["EdgeFeedPort", "FeedBatch", "FeedEnvelope", "HealthFeedPort", "LookupPort", "SendFeedPort"]


@dataclass(frozen=True, slots=True)
class FeedEnvelope:
    """An envelope an edge peer accepted (``ReceivedEnvelope``): what the receive path needs of it."""

    sequence: int
    envelope_hash: bytes
    topic: bytes
    data: bytes
    sent: int
    received_at: float = 0.0
    """When the edge peer accepted it (UNIX seconds; 0 = unknown)."""


@dataclass(frozen=True, slots=True)
class FeedBatch:
    """One ``StreamEnvelopesResponse``: the edge peer's epoch and the envelopes in acceptance order."""

    epoch: str
    resumed: bool
    envelopes: Sequence[FeedEnvelope]


class EdgeFeedPort(Protocol):
    """One edge peer's live envelope feed (``EdgePeerService.StreamEnvelopes``)."""

    @property
    def target(self) -> str:
        """The instance's address (logs)."""
        ...

    def stream(
        self, topics: Sequence[bytes], resume_epoch: str, after_sequence: int
    ) -> AsyncIterator[FeedBatch]:
        """Envelopes on ``topics``, after ``after_sequence`` of ``resume_epoch`` where the cache allows."""
        ...


class HealthFeedPort(Protocol):
    """``HealthService.WatchHealth`` in status mode: the current status first, then every change."""

    def watch(self) -> AsyncIterator[HealthStatus]:
        """The node status, first the current one, then each new one."""
        ...


class SendFeedPort(Protocol):
    """``SendService.WatchSendStatuses``."""

    def watch(self, after_sequence: int) -> AsyncIterator[tuple[int, SendUpdate]]:
        """(change sequence, status) after ``after_sequence`` (0 = everything retained), then live."""
        ...


class LookupPort(Protocol):
    """``HistoryQueryService.Lookup`` by envelope hash."""

    async def stored(self, envelope_hashes: Sequence[bytes]) -> set[bytes]:
        """Which of ``envelope_hashes`` the archive holds."""
        ...
