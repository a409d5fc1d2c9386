"""A REST request is one trace: the caller's W3C traceparent continues into the gateway's HTTP server span,
which is the parent of the gRPC client span of its upstream call (meshcore's interceptors then carry the trace
into the service)."""

from __future__ import annotations

import logging

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from meshcore.tracing import setup_tracing
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


class _TraceIds(logging.Handler):
    """The trace id current when each access-log line was written (what meshcore's JSON lines show)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record.getMessage(), trace.get_current_span().get_span_context().trace_id))


async def test_without_an_exporter_the_callers_trace_still_reaches_the_upstream_and_the_log(
    fakes: Fakes,
) -> None:
    """With no OTLP endpoint (meshcore's pass-through provider, what a deployment without a collector runs)
    the gateway sets the trace context itself instead of the OpenTelemetry ASGI middleware: the caller's
    traceparent still reaches the upstream call and the access-log line, and a request without one gets a
    fresh trace of its own."""
    caller = f"00-{'ab' * 16}-{'cd' * 8}-01"
    cfg = Config.from_env(gateway_env(fakes.address, GATEWAY_ACCESS_LOG="true"))
    provider = setup_tracing("gateway", "", set_global=False)
    deps = connect(cfg, registry=CollectorRegistry(), tracer_provider=provider)
    mesh, http = build(cfg, deps)
    access = logging.getLogger("services.gateway.access")
    handler, level = _TraceIds(), access.level
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    await mesh.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http.port}") as client:
            traced = await client.get("/subscriptions", headers={"traceparent": caller})
            fresh = await client.get("/subscriptions")
            assert traced.status_code == fresh.status_code == 200
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
        await mesh.stop(5)
    first, second = fakes.failures.traceparents[-2:]
    assert first is not None and first.split("-")[1] == "ab" * 16
    assert second is not None and second.split("-")[1] not in ("ab" * 16, "0" * 32)
    assert handler.seen == [
        ("GET /subscriptions 200", int("ab" * 16, 16)),
        ("GET /subscriptions 200", int(second.split("-")[1], 16)),
    ]
    assert not trace.get_current_span().get_span_context().is_valid  # nothing leaked past the requests
