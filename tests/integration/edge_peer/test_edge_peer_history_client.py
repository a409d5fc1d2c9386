"""The edge peer's history-query client reads each Query stream to its end.

The completion is the stream's last message. A client that stopped reading at the completion left the call
suspended until the garbage collector freed it, and the call's client span (OpenTelemetry's gRPC
instrumentation ends it when the response stream ends) with it: a trace missed the span for as long as the
collector did not run (over 120 s in a quiet edge peer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from meshcore.errors import Internal
from services.edge_peer.clients import HistoryClient
from tests.integration.edge_peer.edge_peer_support import history_query, start_fake
from tests.leak_support import cycle_collector_off
from wakunode.ports import HistoryBatch, HistoryComplete

CURSOR = b"\x42" * 36
ENVELOPE = b"\xc1\x80"  # any bytes: the client only splits the batch by the sizes given


class History(history_pb2_grpc.HistoryQueryServiceServicer):
    """One batch, the completion, and (when ``trailing``) a message after it."""

    def __init__(self, *, trailing: bool = False) -> None:
        self.trailing = trailing

    async def Query(self, request: Any, context: Any) -> AsyncIterator[history_pb2.HistoryQueryResponse]:
        batch = history_pb2.HistoryBatch(envelopes_rlp=ENVELOPE, envelope_sizes=[len(ENVELOPE)])
        yield history_pb2.HistoryQueryResponse(batch=batch)
        yield history_pb2.HistoryQueryResponse(complete=history_pb2.HistoryComplete(next_cursor=CURSOR))
        if self.trailing:
            yield history_pb2.HistoryQueryResponse(batch=batch)

    async def Lookup(self, request: Any, context: Any) -> history_pb2.LookupResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not used here")
        raise AssertionError("abort raises")

    async def WatchServed(self, request: Any, context: Any) -> AsyncIterator[history_pb2.WatchServedResponse]:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not used here")
        yield history_pb2.WatchServedResponse()


async def _client(servicer: History) -> tuple[HistoryClient, Any, InMemorySpanExporter]:
    server, address = await start_fake(servicer, history_pb2_grpc.add_HistoryQueryServiceServicer_to_server)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = HistoryClient.connect(address, timeout_s=30, max_message_bytes=1 << 20, tracer_provider=provider)
    return client, server, exporter


async def test_the_client_span_has_ended_when_the_completion_arrives() -> None:
    client, server, exporter = await _client(History())
    try:
        items = []
        with cycle_collector_off():  # what ends the span must not be the collector
            async for item in client.query(history_query()):
                items.append(item)
                if isinstance(item, HistoryComplete):
                    clients = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
                    assert [s.name for s in clients] == ["/mailmesh.history.v1.HistoryQueryService/Query"]
        assert items == [HistoryBatch([ENVELOPE]), HistoryComplete(CURSOR, b"")]
    finally:
        await client.close()
        await server.stop(0)


async def test_a_message_after_the_completion_is_an_error() -> None:
    client, server, _ = await _client(History(trailing=True))
    try:
        with pytest.raises(Internal, match="after its completion"):
            [item async for item in client.query(history_query())]
    finally:
        await client.close()
        await server.stop(0)
