"""The hooks a host (the edge-peer service, the CLI, tests) plugs into a :class:`~wakunode.node.WakuNode`.

The node does protocol work only; where envelopes go and where history comes from is the host's business:

- :class:`EnvelopeSink` — receives every *new, valid* envelope the relay accepts (from peers via 0x01, and
  local :meth:`~wakunode.node.WakuNode.publish` calls). The edge peer forwards them to ingest and to its
  live subscribers.
- :class:`HistoryBackend` — answers decoded 0x7e history requests with batches of raw envelopes and a
  completion (or a failure). The edge peer calls history-query; tests use
  :class:`wakunode.memory.MemoryHistory`.
- :class:`Clock` — wall time for envelope validation, monotonic time for limits; injectable for tests.
- :class:`PeerDirectory` — who is trusted / static (the devp2p ``Server`` is one).
- :class:`P2PListener` — 0x7f / 0x7d from trusted peers (the requesting client registers one).

Nothing here imports gRPC, generated protos or services.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.responses import Completion

__all__ = [
    "Clock",
    "EnvelopeSink",
    "HistoryBackend",
    "HistoryBatch",
    "HistoryComplete",
    "HistoryFailure",
    "HistoryItem",
    "MailserverQuery",
    "P2PListener",
    "PeerDirectory",
    "SystemClock",
]


class Clock(Protocol):
    """Time sources. Envelope validation uses :meth:`time` (UNIX seconds, protocol-notes §1.5); rate limits,
    timers and durations use :meth:`monotonic`."""

    def time(self) -> float:
        """Wall-clock UNIX time in seconds."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds."""
        ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        """``time.time()``."""
        return time.time()

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()


@runtime_checkable
class EnvelopeSink(Protocol):
    """Where accepted envelopes go (the edge peer: ingest + live subscribers).

    **Back-pressure contract.** :meth:`accept` is awaited in the sending peer's handler task, so while it
    waits that peer's further packets queue up (devp2p queues a few per peer, then stops reading its socket,
    and TCP flow control slows the remote down); other peers are not affected. It should therefore return
    quickly — typically after putting the batch on a bounded queue — and may wait briefly to push back when
    downstream is slow. The node bounds every call by ``NodeConfig.sink_timeout``; a call that takes longer is
    abandoned, counted in ``WakuMetrics.sink_failures["timeout"]`` and the batch is not retried (the
    envelopes stay in the relay cache and are still forwarded). An exception is counted as
    ``sink_failures["error"]``. Relay does not depend on the sink; confirmations do (§3.6): they are sent
    once the sink has answered and list every envelope it did not take (refused, timed out, raised) as an
    error, so a Batch Ack never covers an envelope the node dropped; the next copy of such an envelope, from
    any peer, is handed to the sink again.
    """

    async def accept(
        self,
        peer_id: bytes | None,
        envelopes: Sequence[Envelope],
        received_at: float,
        *,
        ephemeral: bool = False,
    ) -> bool:
        """Take new envelopes, in arrival order; True when taken, False when the sink had to drop them.

        ``peer_id`` is the 32-byte node ID (keccak256 of the public key) of the peer they came from, or None
        for a local :meth:`~wakunode.node.WakuNode.publish`. ``received_at`` is the node's UNIX time of
        acceptance. ``ephemeral`` is True for local envelopes published as relay-only (never archive them).
        A sink that drops envelopes (no room downstream) counts and logs that itself, then returns False.
        """
        ...


@dataclass(frozen=True, slots=True)
class MailserverQuery:
    """A decoded, validated 0x7e request, with what the backend needs to shape its answer."""

    request: HistoryRequest
    """The request as the peer sent it: ``upper = 0`` means "now + 60" and ``limit = 0`` the default (the
    wire's own markers for "defaulted"), a limit may exceed 1000 and a bloom may accompany topics. It has
    passed status-go's ``Validate``; the backend applies the mailserver defaults
    (:meth:`~wakucodec.historyrequest.HistoryRequest.normalize`) — history-query does, and binds its cursors
    to the request as sent, so a walk with ``upper = 0`` keeps working while "now + 60" moves."""
    dialect: Dialect
    """The dialect it arrived in (the node answers in the matching forms)."""
    request_id: bytes
    """The 32-byte ID the 0x7d will carry."""
    requester_id: bytes
    """32-byte node ID of the requesting peer."""
    max_batch_bytes: int
    """Budget for the sum of one batch's envelope sizes: the max message size minus room for the list
    header. The node re-splits anything larger, so this is advisory."""
    max_batch_envelopes: int
    """Envelopes per batch: 0 = no limit, 1 = one per 0x7f (``Batch = false`` or geth's single form)."""
    signer: bytes | None = None
    """64-byte public key that signed an envelope request, if any."""


@dataclass(frozen=True, slots=True)
class HistoryBatch:
    """Raw envelopes (exact RLP, as archived) for the requester, in delivery order."""

    envelopes: Sequence[bytes]


@dataclass(frozen=True, slots=True)
class HistoryComplete:
    """The end of a successful answer."""

    next_cursor: bytes
    """Cursor for the next page: 36 bytes, or empty when nothing remains (status-go clients accept only
    those two lengths, §3.7)."""
    last_envelope_hash: bytes
    """Hash of the last envelope delivered; 32 zero bytes when none."""


@dataclass(frozen=True, slots=True)
class HistoryFailure:
    """The request failed after it was accepted; the text goes into the 0x7d ``ERROR=`` payload."""

    message: str


#: What a :class:`HistoryBackend` yields: batches, then exactly one completion or failure.
HistoryItem: TypeAlias = HistoryBatch | HistoryComplete | HistoryFailure


class HistoryBackend(Protocol):
    """Answers history requests (the edge peer: history-query's ``Query`` stream)."""

    def query(self, query: MailserverQuery) -> AsyncIterator[HistoryItem]:
        """Yield :class:`HistoryBatch` items, then one :class:`HistoryComplete` or :class:`HistoryFailure`.

        Raising instead of yielding a failure is treated as ``HistoryFailure("failed to process request")``
        after logging. The node consumes the iterator at the requester's pace (each batch is written before
        the next is pulled) and closes it early if the requester goes away or the request times out.
        """
        ...


class PeerDirectory(Protocol):
    """Who the host trusts; :class:`devp2p.server.Server` implements it."""

    def is_trusted(self, pubkey: bytes) -> bool:
        """Whether the 64-byte public key is trusted."""
        ...

    @property
    def static_peers(self) -> tuple[bytes, ...]:
        """64-byte public keys of the static peers."""
        ...


class P2PListener(Protocol):
    """Receives peer-to-peer packets from *trusted* peers (§3.7); the client role registers one."""

    def on_p2p_envelopes(self, pubkey: bytes, envelopes: list[Envelope]) -> None:
        """Envelopes from a 0x7f packet (already split and decoded; undecodable ones are dropped)."""
        ...

    def on_p2p_complete(self, pubkey: bytes, completion: Completion) -> None:
        """A decoded 0x7d packet."""
        ...
