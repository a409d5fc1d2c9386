"""Trace context across shared Publish calls: each envelope carries its attempt's ``traceparent`` to the edge
peer, and each call runs under a ``send publish batch`` span of its own trace, linked to every attempt it
carries — never inside the trace of the attempt whose task happens to run the group commit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc.aio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from meshcore.tracing import traceparent
from services.send.clients import EdgePeers
from services.send.ports import PublishOutcome


class GatedEdgePeer(edgepeer_pb2_grpc.EdgePeerServiceServicer):
    """Records each Publish request and holds the first call until :attr:`gate` is set."""

    def __init__(self) -> None:
        self.requests: list[edgepeer_pb2.PublishRequest] = []
        self.arrived = asyncio.Event()
        self.gate = asyncio.Event()

    async def Publish(
        self, request: edgepeer_pb2.PublishRequest, context: Any
    ) -> edgepeer_pb2.PublishResponse:
        self.requests.append(request)
        self.arrived.set()
        await self.gate.wait()
        published = edgepeer_pb2.PUBLISH_STATUS_PUBLISHED
        return edgepeer_pb2.PublishResponse(
            results=[edgepeer_pb2.PublishResult(status=published, relayed_to=1) for _ in request.envelopes]
        )


@pytest.fixture
async def edge() -> AsyncIterator[tuple[GatedEdgePeer, str]]:
    servicer = GatedEdgePeer()  # type: ignore[abstract]  # only Publish is served
    server = grpc.aio.server()
    edgepeer_pb2_grpc.add_EdgePeerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield servicer, f"127.0.0.1:{port}"
    await server.stop(None)


async def test_every_envelope_carries_its_attempt_and_every_call_links_to_the_attempts_it_carries(
    edge: tuple[GatedEdgePeer, str],
) -> None:
    servicer, address = edge
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    edges = EdgePeers(
        [address],
        publish_timeout_s=5.0,
        call_timeout_s=5.0,
        registry=CollectorRegistry(),
        tracer_provider=provider,
    )
    tracer = provider.get_tracer("test")
    attempts: dict[str, trace.SpanContext] = {}

    async def attempt(name: str) -> PublishOutcome:
        with tracer.start_as_current_span(name) as span:
            attempts[name] = span.get_span_context()
            return await edges.publish(name.encode(), name.encode().ljust(32, b"."), ephemeral=False)

    try:
        first = asyncio.create_task(attempt("a"))
        await servicer.arrived.wait()  # call 1 is in flight with "a"
        later = [asyncio.create_task(attempt(name)) for name in ("b", "c")]
        while len(attempts) < 3:  # both wait for the next call
            await asyncio.sleep(0)
        servicer.gate.set()
        outcomes = await asyncio.gather(first, *later)
    finally:
        await edges.close()
    assert [o.relayed_to for o in outcomes] == [1, 1, 1]
    assert [list(r.envelopes) for r in servicer.requests] == [[b"a"], [b"b", b"c"]]
    tp = {name: traceparent(context) for name, context in attempts.items()}
    assert [list(r.traceparents) for r in servicer.requests] == [[tp["a"]], [tp["b"], tp["c"]]]

    spans = exporter.get_finished_spans()
    batches = [s for s in spans if s.name == "send publish batch"]
    assert [s.parent for s in batches] == [None, None]  # each call starts a trace of its own
    assert {s.context.trace_id for s in batches}.isdisjoint({c.trace_id for c in attempts.values()})
    assert [[_ids(link.context) for link in s.links] for s in batches] == [
        [_ids(attempts["a"])],
        [_ids(attempts["b"]), _ids(attempts["c"])],
    ]
    assert [dict(s.attributes or {})["messaging.batch.message_count"] for s in batches] == [1, 2]
    assert batches[1].links[0].attributes == {"mailmesh.envelope_hash": b"b".ljust(32, b".").hex()}
    calls = [s for s in spans if s.name.endswith("EdgePeerService/Publish")]
    assert [_ids(s.parent) for s in calls] == [
        _ids(s.context) for s in batches
    ]  # the calls are their children


def _ids(context: trace.SpanContext | None) -> tuple[int, int]:
    assert context is not None
    return context.trace_id, context.span_id
