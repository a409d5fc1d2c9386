"""What the followers need from other services, as protocols over domain values (clients.py implements them
over gRPC; unit tests over fakes)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from msgstore.types import HealthStatus
from services.subscription.rules import SendUpdate

__all__ = [
    "EdgeFeedPort",
    "FeedBatch",
    "FeedEnvelope",
    "HealthFeedPort",
    "LookupPort",
    "SendFeedItem",
    "SendFeedPort",
    "ServedBatch",
    "ServedFeedPort",
]


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


@dataclass(frozen=True, slots=True)
class SendFeedItem:
    """One ``WatchSendStatusesResponse``: a request's status after a change, or a gap report."""

    position: bytes
    """Where to resume after this item (opaque; send.proto ``WatchSendStatusesResponse.position``)."""
    update: SendUpdate | None = None
    """The request's full status after the change; None in a gap report."""
    gap_shards: tuple[int, ...] = ()
    """Outbox shards whose changes after the requested position are no longer retained."""


@dataclass(frozen=True, slots=True)
class ServedBatch:
    """One ``WatchServedResponse``: the history-query process's epoch and the chunks it served."""

    epoch: str
    resumed: bool
    """Set in a stream's first message only (history.proto)."""
    chunks: Sequence[tuple[int, Sequence[bytes]]]
    """(sequence, envelope hashes) in serving order."""


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
    """``SendService.WatchSendStatuses`` and the listing a gap is repaired from."""

    def watch(self, after_position: bytes) -> AsyncIterator[SendFeedItem]:
        """Changes after ``after_position`` (empty = everything retained), then live; a resume whose
        changes are partly gone first yields a gap report."""
        ...

    def statuses(self) -> AsyncIterator[SendUpdate]:
        """The current status of every request the outbox holds (``ListSendStatuses``)."""
        ...


class LookupPort(Protocol):
    """``HistoryQueryService.Lookup`` by envelope hash."""

    async def stored(self, envelope_hashes: Sequence[bytes]) -> set[bytes]:
        """Which of ``envelope_hashes`` the archive holds."""
        ...


class ServedFeedPort(Protocol):
    """One history-query instance's served envelopes (``HistoryQueryService.WatchServed``)."""

    @property
    def target(self) -> str:
        """The instance's address (logs, position name)."""
        ...

    def watch(self, resume_epoch: str, after_sequence: int) -> AsyncIterator[ServedBatch]:
        """Served chunks after ``after_sequence`` of ``resume_epoch`` where its ring allows, then live."""
        ...
