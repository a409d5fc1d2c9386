"""Ingest and history-query as the edge peer sees them (implement ``forwarder.IngestPort`` and
``mailserver_bridge.HistoryQueryPort``).

- :class:`IngestClient` opens ``IngestService.Ingest`` (bidi) with no deadline: the stream lives as long as
  the process; the forwarder reconnects when it ends. Failures come back as :mod:`meshcore.errors`.
- :class:`HistoryClient` runs ``HistoryQueryService.Query`` with a deadline of the mailserver request
  timeout (or what is left of the calling RPC's deadline); a query a history replica refuses UNAVAILABLE
  before answering is retried on another (a read; docs/reliability.md "When calls are retried").
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import grpc.aio
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from mailmesh.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from meshcore import make_channel, remaining_timeout, translate_rpc_error
from meshcore.errors import Internal
from meshcore.protoconv import timestamp
from services.edge_peer.forwarder import IngestAck, OutgoingBatch
from wakucodec.errors import InvalidResponse
from wakucodec.responses import split_sized
from wakunode.ports import HistoryBatch, HistoryComplete, MailserverQuery

__all__ = ["HISTORY_SERVICE", "INGEST_SERVICE", "HistoryClient", "IngestClient", "to_history_request"]

INGEST_SERVICE = "mailmesh.ingest.v1.IngestService"
HISTORY_SERVICE = "mailmesh.history.v1.HistoryQueryService"
_SOURCE_MAX = 128


def _end(call: object) -> None:
    """Cancel a call that may be wrapped by the client interceptors (then cancelling it ends the wrapper)."""
    cancel = getattr(call, "cancel", None)
    if cancel is not None:
        cancel()


class IngestClient:
    """The Ingest bidi stream."""

    def __init__(self, channel: grpc.aio.Channel, *, source: str) -> None:
        self._channel = channel
        self._stub = ingest_pb2_grpc.IngestServiceStub(channel)
        self._source = source.encode()[:_SOURCE_MAX].decode(errors="ignore")

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        source: str,
        max_message_bytes: int,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> IngestClient:
        """Open a channel to ingest (call from a coroutine)."""
        channel = make_channel(
            target,
            service_name=INGEST_SERVICE,
            timeout_s=3600.0,  # the service-config default; the stream itself is opened without a deadline
            max_message_bytes=max_message_bytes,
            registry=registry,
            tracer_provider=tracer_provider,
            # Reconnect quickly after an ingest restart (gRPC's default backoff grows to 120 s).
            options=[("grpc.max_reconnect_backoff_ms", 2000), ("grpc.initial_reconnect_backoff_ms", 100)],
        )
        return cls(channel, source=source)

    def _request(self, batch: OutgoingBatch) -> ingest_pb2.IngestBatch:
        return ingest_pb2.IngestBatch(
            batch_id=batch.batch_id,
            envelopes=batch.envelopes,
            source_peer_id=batch.source_peer_id,
            received_at=timestamp(batch.received_at),
            source=self._source,
        )

    async def stream(self, batches: AsyncIterator[OutgoingBatch]) -> AsyncIterator[IngestAck]:
        """One Ingest stream (forwarder.IngestPort)."""

        async def requests() -> AsyncIterator[ingest_pb2.IngestBatch]:
            async for batch in batches:
                yield self._request(batch)

        call = self._stub.Ingest(requests(), wait_for_ready=True)
        try:
            async for ack in call:
                yield IngestAck(ack.batch_id, ack.accepted, ack.duplicates, len(ack.rejections))
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        finally:
            _end(call)

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()


def to_history_request(query: MailserverQuery) -> history_pb2.HistoryQueryRequest:
    """The HistoryQueryRequest for a decoded 0x7e, carrying the request exactly as the peer sent it.

    ``upper = 0`` and ``limit = 0`` are the peer's own "use the default" and travel as such (history.proto
    gives 0 the same meaning); history-query applies the defaults, caps the limit and lets topics override
    the bloom — the one place that does (WAKU-MAILSERVER request semantics, status-go
    ``MessagesRequestPayload.SetDefaults``). Its cursors bind the request as sent, which is why "now + 60"
    must not be resolved here: it moves every second, and the next page's cursor would look foreign.
    """
    request = query.request
    return history_pb2.HistoryQueryRequest(
        lower=request.lower,
        upper=request.upper,
        bloom=request.bloom or b"",
        topics=list(request.topics),
        limit=request.limit,
        cursor=request.cursor,
        max_batch_bytes=query.max_batch_bytes,
        max_batch_envelopes=query.max_batch_envelopes,
        requester_peer_id=query.requester_id,
        request_id=query.request_id,
    )


class HistoryClient:
    """HistoryQueryService.Query."""

    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float) -> None:
        self._channel = channel
        self._stub = history_pb2_grpc.HistoryQueryServiceStub(channel)
        self._timeout_s = timeout_s

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        timeout_s: float,
        max_message_bytes: int,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> HistoryClient:
        """Open a channel to history-query (call from a coroutine)."""
        channel = make_channel(
            target,
            service_name=HISTORY_SERVICE,
            timeout_s=timeout_s,
            retry_attempts=3,
            idempotent_methods=("Query",),
            max_message_bytes=max_message_bytes,
            registry=registry,
            tracer_provider=tracer_provider,
            options=[("grpc.max_reconnect_backoff_ms", 2000), ("grpc.initial_reconnect_backoff_ms", 100)],
        )
        return cls(channel, timeout_s=timeout_s)

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryBatch | HistoryComplete]:
        """Batches, then the completion (mailserver_bridge.HistoryQueryPort)."""
        call = self._stub.Query(to_history_request(query), timeout=remaining_timeout(self._timeout_s))
        completion: HistoryComplete | None = None
        try:
            # Read to the stream's end (the completion is its last message): a call left suspended after the
            # completion ends only when the collector frees it, and with it the client span of its trace.
            async for response in call:
                if completion is not None:
                    raise Internal("history-query sent a message after its completion")
                kind = response.WhichOneof("kind")
                if kind == "batch":
                    batch = response.batch
                    try:
                        envelopes = split_sized(batch.envelopes_rlp, batch.envelope_sizes)
                    except InvalidResponse as err:
                        raise Internal(f"history-query sent a malformed batch: {err}") from err
                    yield HistoryBatch(envelopes)
                elif kind == "complete":
                    done = response.complete
                    completion = HistoryComplete(done.next_cursor, done.last_envelope_hash)
                else:
                    raise Internal("history-query sent an empty response message")
            if completion is not None:
                yield completion
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        finally:
            _end(call)

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()
