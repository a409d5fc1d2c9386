"""mailmesh.history.v1.HistoryQueryService: proto ⇄ domain translation and metrics, nothing else.

Errors are raised as :mod:`meshcore.errors` categories and mapped to status codes by the server's
interceptor: a refused request or cursor → INVALID_ARGUMENT with its message (before any batch); the
archive down → UNAVAILABLE (possibly after some batches, which stay valid; history.proto).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from archivestore.types import Direction
from mailmesh.common.v1 import common_pb2
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from meshcore.errors import DeadlineExceeded, InvalidArgument, Unavailable
from services.history.logic import INVALID_FIELD, Batch, HistoryQuery, HistoryService, InvalidQuery
from services.history.metrics import HistoryMetrics
from services.history.served import ServedFeed

__all__ = ["SERVICE_NAME", "HistoryServicer"]

SERVICE_NAME = "mailmesh.history.v1.HistoryQueryService"
_DIRECTIONS = {
    common_pb2.DIRECTION_UNSPECIFIED: None,
    common_pb2.DIRECTION_FORWARD: Direction.FORWARD,
    common_pb2.DIRECTION_BACKWARD: Direction.BACKWARD,
}


def to_query(request: history_pb2.HistoryQueryRequest) -> HistoryQuery:
    """The domain query of a HistoryQueryRequest (shape checks happen in ``HistoryService.prepare``)."""
    if request.direction not in _DIRECTIONS:
        raise InvalidQuery(f"unknown direction {request.direction}", INVALID_FIELD, field="direction")
    return HistoryQuery(
        lower=request.lower,
        upper=request.upper,
        bloom=request.bloom or None,
        topics=tuple(request.topics),
        limit=request.limit,
        cursor=request.cursor,
        direction=_DIRECTIONS[request.direction],
        max_batch_bytes=request.max_batch_bytes,
        max_batch_envelopes=request.max_batch_envelopes,
    )


class HistoryServicer(history_pb2_grpc.HistoryQueryServiceServicer):
    """Query (server streaming) and Lookup over a :class:`HistoryService`; WatchServed over its feed."""

    def __init__(
        self, service: HistoryService, metrics: HistoryMetrics, served: ServedFeed | None = None
    ) -> None:
        self._service = service
        self._metrics = metrics
        self._served = served or ServedFeed(ring_hashes=1000)

    async def Query(  # noqa: N802 - gRPC method name
        self, request: history_pb2.HistoryQueryRequest, context: Any
    ) -> AsyncIterator[history_pb2.HistoryQueryResponse]:
        """Batches as the archive is read, then one completion (history.proto)."""
        m = self._metrics
        m.delivery_attempts.inc()
        started = time.perf_counter()
        try:
            prepared = self._service.prepare(to_query(request))
        except InvalidArgument:
            m.failure("validation")
            raise
        m.query(by_topics=prepared.by_topics, resumed=prepared.resumed)
        if prepared.max_batch_envelopes != 1:
            m.requests_batched.inc()
        processing = 0.0
        stream = self._service.run(prepared)
        try:
            while True:
                resumed_at = time.perf_counter()
                try:
                    item = await anext(stream)
                except StopAsyncIteration:
                    break
                finally:
                    processing += time.perf_counter() - resumed_at
                if isinstance(item, Batch):
                    m.batch_size.observe(item.size_bytes)
                    m.envelopes.inc(len(item.sizes))
                    response = history_pb2.HistoryQueryResponse()
                    response.batch.envelopes_rlp = item.rlp
                    response.batch.envelope_sizes.extend(item.sizes)
                    yield response
                else:
                    yield history_pb2.HistoryQueryResponse(
                        complete=history_pb2.HistoryComplete(
                            next_cursor=item.next_cursor,
                            last_envelope_hash=item.last_envelope_hash,
                            delivered=item.delivered,
                        )
                    )
        except (Unavailable, DeadlineExceeded):
            m.failure("iterator")
            raise
        except Exception:
            m.failure("process")
            raise
        finally:
            await stream.aclose()
            m.bundle_process_duration.observe(processing)
            m.delivery_duration.observe(time.perf_counter() - started)

    async def Lookup(  # noqa: N802 - gRPC method name
        self, request: history_pb2.LookupRequest, context: Any
    ) -> history_pb2.LookupResponse:
        """Which of the hashes are archived."""
        found = await self._service.lookup(list(request.envelope_hashes), list(request.message_hashes))
        return history_pb2.LookupResponse(
            stored_envelope_hashes=found.envelope_hashes, stored_message_hashes=found.message_hashes
        )

    async def WatchServed(  # noqa: N802 - gRPC method name
        self, request: history_pb2.WatchServedRequest, context: Any
    ) -> AsyncIterator[history_pb2.WatchServedResponse]:
        """Served chunks, first message with the epoch and ``resumed`` (history.proto)."""
        watch = self._served.watch(request.resume_epoch, request.after_sequence)
        try:
            yield history_pb2.WatchServedResponse(epoch=watch.epoch, resumed=watch.resumed)
            while True:
                chunks = await watch.next()
                yield history_pb2.WatchServedResponse(
                    epoch=watch.epoch,
                    chunks=[history_pb2.ServedChunk(sequence=s, envelope_hashes=h) for s, h in chunks],
                )
        finally:
            watch.close()
