"""OpenTelemetry tracing: one provider per process and the gRPC interceptors that use it.

Spans cross service hops because the client interceptors inject the W3C ``traceparent`` into
call metadata and the server interceptor continues the trace from it. ``grpc.health.v1`` is left
out on both sides: kubelet and the health service poll it every few seconds, and those spans
would drown the traces anyone wants to look at.

Handlers must be ``async def`` (response-streaming ones async generators), and callers must
consume streaming responses with ``async for`` rather than ``call.read()``: the OTel aio
interceptors await unary behaviours and iterate streaming ones.
"""

from __future__ import annotations

from typing import cast

import grpc.aio
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor, filters
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = [
    "client_tracing_interceptors",
    "server_tracing_interceptor",
    "setup_tracing",
]


def setup_tracing(service_name: str, otlp_endpoint: str, *, set_global: bool = True) -> TracerProvider:
    """Create the process's tracer provider for ``service_name``.

    With an ``otlp_endpoint`` (``http://collector:4317``) spans are batched to it over OTLP/gRPC;
    with an empty one the provider records nothing anywhere, which keeps trace ids in logs and
    context propagation working at almost no cost. ``set_global`` installs it as the global
    provider (OpenTelemetry allows that once per process; tests pass False). Call
    ``provider.shutdown()`` at exit to flush what is batched.
    """
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    if otlp_endpoint:
        # Imported only when used: the exporter pulls in a second gRPC channel stack.
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
    if set_global:
        trace.set_tracer_provider(provider)
    return provider


def _not_health() -> object:
    return filters.negate(filters.health_check())


def server_tracing_interceptor(
    tracer_provider: trace.TracerProvider | None = None,
) -> grpc.aio.ServerInterceptor:
    """Return the OTel aio server interceptor (health checks excluded); None uses the global provider."""
    # The instrumentation package ships no type information, hence the cast and ignores.
    interceptor = aio_server_interceptor(tracer_provider=tracer_provider, filter_=_not_health())  # type: ignore[no-untyped-call]
    return cast(grpc.aio.ServerInterceptor, interceptor)


def client_tracing_interceptors(
    tracer_provider: trace.TracerProvider | None = None,
) -> list[grpc.aio.ClientInterceptor]:
    """Return the four OTel aio client interceptors (health checks excluded); None = global provider."""
    interceptors = aio_client_interceptors(tracer_provider=tracer_provider, filter_=_not_health())  # type: ignore[no-untyped-call]
    return cast(list[grpc.aio.ClientInterceptor], interceptors)
