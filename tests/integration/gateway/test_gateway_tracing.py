"""A REST request is one trace: the caller's W3C traceparent continues into the gateway's HTTP server span,
which is the parent of the gRPC client span of its upstream call (meshcore's interceptors then carry the trace
into the service)."""

from __future__ import annotations

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from services.gateway.config import Config
from services.gateway.server import build, connect
from tests.integration.gateway.gateway_fakes import Fakes
from tests.integration.gateway.gateway_support import gateway_env


async def test_http_span_parents_the_grpc_call(fakes: Fakes) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    cfg = Config.from_env(gateway_env(fakes.address))
    deps = connect(cfg, registry=CollectorRegistry(), tracer_provider=provider)
    mesh, http = build(cfg, deps)
    await mesh.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http.port}") as client:
            reply = await client.get(
                "/subscriptions", headers={"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"}
            )
            assert reply.status_code == 200
    finally:
        await mesh.stop(5)
    spans = exporter.get_finished_spans()
    (server,) = [s for s in spans if s.kind is SpanKind.SERVER]
    (call,) = [s for s in spans if s.kind is SpanKind.CLIENT]
    assert server.name.startswith("GET /subscriptions")
    assert call.name == "/mailmesh.subscription.v1.SubscriptionService/ListSubscriptions"
    # The caller's trace continues through the gateway into the gRPC hop.
    assert server.context.trace_id == call.context.trace_id == int("ab" * 16, 16)
    assert call.parent is not None and call.parent.span_id == server.context.span_id
