"""The archive service as seen from history-query: :class:`ArchiveReader` implements ``logic.ArchivePort``.

Every call's deadline is ``HISTORY_ARCHIVE_TIMEOUT_SECONDS`` or what is left of the incoming call's deadline,
whichever is sooner (:func:`meshcore.remaining_timeout`); reads are retried on UNAVAILABLE by the channel's
retry policy (they are idempotent). Envelopes are requested with ENVELOPE_VIEW_PACKED: history forwards the
RLPs as is, so the archive skips re-decoding, re-hashing and PoW, and neither side builds a message per
envelope — the page arrives as columns, which is what :class:`~services.history.logic.ArchivePage` holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import grpc.aio
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from archivestore.types import Direction
from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from mailmesh.common.v1 import common_pb2
from meshcore import make_channel, remaining_timeout, translate_rpc_error
from services.history.config import Config
from services.history.logic import ArchivePage, ArchiveRequest, LookupResult

__all__ = ["ARCHIVE_SERVICE", "ArchiveReader"]

ARCHIVE_SERVICE = "mailmesh.archive.v1.ArchiveService"
_IDEMPOTENT_READS = ("QueryEnvelopes", "ContainsEnvelopes")
_DIRECTION = {
    Direction.FORWARD: common_pb2.DIRECTION_FORWARD,
    Direction.BACKWARD: common_pb2.DIRECTION_BACKWARD,
}


class ArchiveReader:
    """Archive reads over gRPC; errors come back as :mod:`meshcore.errors` categories."""

    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float) -> None:
        self._channel = channel
        self._stub = archive_pb2_grpc.ArchiveServiceStub(channel)
        self._timeout_s = timeout_s

    @classmethod
    def connect(
        cls,
        cfg: Config,
        *,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> ArchiveReader:
        """Open a channel to ``HISTORY_ARCHIVE_ADDR`` as the config says (call from a coroutine)."""
        channel = make_channel(
            cfg.archive_addr,
            service_name=ARCHIVE_SERVICE,
            timeout_s=cfg.archive_timeout_s,
            retry_attempts=cfg.archive_retry_attempts,
            idempotent_methods=_IDEMPOTENT_READS if cfg.archive_retry_attempts > 1 else (),
            load_balancing=cfg.archive_load_balancing,
            max_message_bytes=cfg.runtime.max_message_bytes,
            registry=registry,
            tracer_provider=tracer_provider,
        )
        return cls(channel, timeout_s=cfg.archive_timeout_s)

    async def close(self) -> None:
        """Close the channel (pending calls are cancelled)."""
        await self._channel.close()

    async def query(self, request: ArchiveRequest) -> ArchivePage:
        """ArchiveService.QueryEnvelopes for one chunk."""
        message = archive_pb2.QueryEnvelopesRequest(
            range=common_pb2.TimeRange(lower=request.lower, upper=request.upper),
            topics=request.topics,
            bloom=request.bloom or b"",
            limit=request.limit,
            direction=_DIRECTION[request.direction],
            view=archive_pb2.ENVELOPE_VIEW_PACKED,
        )
        if request.after is not None:
            message.after.CopyFrom(common_pb2.Position(sent=request.after.sent, hash=request.after.hash))
        try:
            reply = await self._stub.QueryEnvelopes(message, timeout=remaining_timeout(self._timeout_s))
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        packed = reply.packed
        return ArchivePage(
            rlp=packed.rlp,
            sizes=packed.rlp_sizes,
            sent=packed.sent,
            hashes=packed.hashes,
            has_more=reply.has_more,
        )

    async def contains(
        self, envelope_hashes: Sequence[bytes], message_hashes: Sequence[bytes]
    ) -> LookupResult:
        """ArchiveService.ContainsEnvelopes."""
        message = archive_pb2.ContainsEnvelopesRequest(
            envelope_hashes=envelope_hashes, message_hashes=message_hashes
        )
        try:
            reply = await self._stub.ContainsEnvelopes(message, timeout=remaining_timeout(self._timeout_s))
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        return LookupResult(list(reply.present_envelope_hashes), list(reply.present_message_hashes))
