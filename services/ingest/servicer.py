"""IngestService over gRPC: protos in, :class:`~services.ingest.logic.Ingestor` calls, protos out.

Per-envelope problems are Rejections inside an ack, never a failed call; a batch that breaks the API itself
(no ``received_at``, more than 10000 envelopes) has every envelope rejected as MALFORMED, so a stream never
crashes on input. A call fails only when the archive could not durably take a write (UNAVAILABLE: nothing of
that batch is acknowledged) or while shutting down. Error codes come from the one interceptor
(meshcore.errors categories raised here or below).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc.aio
from google.protobuf import timestamp_pb2

from mailmesh.common.v1 import common_pb2
from mailmesh.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from meshcore.errors import InvalidArgument
from services.ingest.logic import Ingestor
from services.ingest.model import BatchOutcome, Fault, ItemOutcome, Rejection
from services.ingest.stream import pump

__all__ = ["SERVICE_NAME", "IngestServicer"]

SERVICE_NAME = "mailmesh.ingest.v1.IngestService"

# A string: grpc.aio classes are generic only in their type stubs.
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"

_FAULTS: dict[Fault, common_pb2.EnvelopeFault.ValueType] = {
    Fault.IN_FUTURE: common_pb2.ENVELOPE_FAULT_IN_FUTURE,
    Fault.VERY_OLD: common_pb2.ENVELOPE_FAULT_VERY_OLD,
    Fault.EXPIRED: common_pb2.ENVELOPE_FAULT_EXPIRED,
    Fault.OVERSIZED: common_pb2.ENVELOPE_FAULT_OVERSIZED,
    Fault.LOW_POW: common_pb2.ENVELOPE_FAULT_LOW_POW,
    Fault.TOPIC_NOT_ALLOWED: common_pb2.ENVELOPE_FAULT_TOPIC_NOT_ALLOWED,
    Fault.MALFORMED: common_pb2.ENVELOPE_FAULT_MALFORMED,
    # common.proto has no value for "the archive refused the item"; the detail says so.
    Fault.ARCHIVE_REFUSED: common_pb2.ENVELOPE_FAULT_MALFORMED,
    # Expired by the archive's retention rather than by the envelope's own expiry; the detail says which.
    Fault.PAST_RETENTION: common_pb2.ENVELOPE_FAULT_EXPIRED,
}
_OUTCOMES = {
    ItemOutcome.ACCEPTED: ingest_pb2.INGEST_OUTCOME_ACCEPTED,
    ItemOutcome.DUPLICATE: ingest_pb2.INGEST_OUTCOME_DUPLICATE,
    ItemOutcome.REJECTED: ingest_pb2.INGEST_OUTCOME_REJECTED,
}


def _rejection(r: Rejection) -> ingest_pb2.Rejection:
    return ingest_pb2.Rejection(index=r.index, hash=r.hash, reason=_FAULTS[r.fault], detail=r.detail)


def _ack(batch_id: int, outcome: BatchOutcome) -> ingest_pb2.IngestAck:
    return ingest_pb2.IngestAck(
        batch_id=batch_id,
        accepted=outcome.accepted,
        duplicates=outcome.duplicates,
        rejections=[_rejection(r) for r in outcome.rejections],
    )


def _seconds(stamp: timestamp_pb2.Timestamp) -> float:
    """A google.protobuf.Timestamp as UNIX seconds."""
    return stamp.seconds + stamp.nanos / 1e9


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    """Translates IngestService calls to the ingest logic."""

    def __init__(self, ingestor: Ingestor, *, max_unacked_batches: int) -> None:
        self._ingestor = ingestor
        self._window = max_unacked_batches
        self._draining = asyncio.Event()

    async def drain(self) -> None:
        """Graceful shutdown, step 1: streams stop reading, send the acks they owe, then end UNAVAILABLE."""
        self._draining.set()

    async def _ingest_batch(self, batch: ingest_pb2.IngestBatch) -> BatchOutcome:
        raws = list(batch.envelopes)
        if not batch.HasField("received_at"):
            return self._ingestor.refuse(raws, "batch has no received_at (required)")
        return await self._ingestor.ingest(raws, _seconds(batch.received_at))

    async def _stream_ack(self, batch: ingest_pb2.IngestBatch) -> ingest_pb2.IngestAck:
        return _ack(batch.batch_id, await self._ingest_batch(batch))

    async def Ingest(  # noqa: N802 - gRPC method name
        self, request_iterator: AsyncIterator[ingest_pb2.IngestBatch], context: Context
    ) -> AsyncIterator[ingest_pb2.IngestAck]:
        """One ack per batch once it is durable, out of order; at most ``window`` batches unacknowledged."""
        async for ack in pump(request_iterator, self._stream_ack, window=self._window, stop=self._draining):
            yield ack

    async def IngestOne(  # noqa: N802 - gRPC method name
        self, request: ingest_pb2.IngestOneRequest, context: Context
    ) -> ingest_pb2.IngestOneResponse:
        """One envelope; returns once it is durable, known, or refused."""
        received_at = _seconds(request.received_at) if request.HasField("received_at") else None
        outcome = await self._ingestor.ingest([request.envelope], received_at)
        response = ingest_pb2.IngestOneResponse(
            outcome=_OUTCOMES[outcome.outcomes[0]], hash=outcome.hashes[0]
        )
        if outcome.rejections:
            response.rejection.CopyFrom(_rejection(outcome.rejections[0]))
        return response

    async def IngestBatch(  # noqa: N802 - gRPC method name
        self, request: ingest_pb2.IngestBatchRequest, context: Context
    ) -> ingest_pb2.IngestBatchResponse:
        """One batch, with the semantics of one Ingest stream message."""
        if not request.HasField("batch"):
            raise InvalidArgument("batch is required", {"field": "batch"})
        outcome = await self._ingest_batch(request.batch)
        return ingest_pb2.IngestBatchResponse(ack=_ack(request.batch.batch_id, outcome))
