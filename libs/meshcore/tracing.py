"""OpenTelemetry tracing: one provider per process and the gRPC interceptors that use it.

Spans cross service hops because the client interceptors inject the W3C ``traceparent`` into
call metadata and the server interceptor continues the trace from it. ``grpc.health.v1`` is left
out on both sides: kubelet and the health service poll it every few seconds, and those spans
would drown the traces anyone wants to look at.

The server side is :class:`ServerSpans`, used by the one server interceptor of
:mod:`meshcore.interceptors` (which also steps response streams safely, see there); :func:`traced_steps`
does the same stepping for any async iterator a service drives itself (the edge peer's mailserver requests
arrive over RLPx, not gRPC). Callers must consume streaming responses with ``async for`` rather than
``call.read()``: the OTel aio client interceptors iterate streaming calls.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, :func:`setup_tracing` exports every span over OTLP/gRPC; the
``OTEL_BSP_*`` variables of the OpenTelemetry SDK (batch size, schedule delay) apply as documented there.
Without it no span is recorded at all: every "span" is the caller's span context passed through (a fresh
trace id when there is no caller), so log lines still carry a trace id and the W3C ``traceparent`` sent
downstream is the caller's, and a service that does export continues the caller's trace as if this one were
not there (W3C Trace Context, "traceparent Header"; OpenTelemetry trace API, "Behavior of the API in the
absence of an installed SDK": a non-recording span carries its parent's context). That is ~0.1 ms less CPU
per call than recording spans nobody reads (docs/benchmarks.md "The send service (issue 11)").
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import unquote

import grpc
import grpc.aio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "ServerSpans",
    "client_tracing_interceptors",
    "parse_traceparent",
    "setup_tracing",
    "start_span",
    "traced_steps",
    "traceparent",
]

T = TypeVar("T")
_TRACE_CONTEXT = TraceContextTextMapPropagator()


def setup_tracing(service_name: str, otlp_endpoint: str, *, set_global: bool = True) -> TracerProvider:
    """Create the process's tracer provider for ``service_name``.

    With an ``otlp_endpoint`` (``http://collector:4317``) spans are batched to it over OTLP/gRPC;
    with an empty one the provider records nothing: its spans only pass the caller's context on (see the
    module docstring), which keeps trace ids in logs and context propagation working at almost no cost.
    ``set_global`` installs it as the global provider (OpenTelemetry allows that once per process; tests
    pass False). Call ``provider.shutdown()`` at exit to flush what is batched.
    """
    resource = Resource.create({SERVICE_NAME: service_name})
    if not otlp_endpoint:
        provider: TracerProvider = _PassThroughProvider(resource=resource)
    else:
        # Imported only when used: the exporter pulls in a second gRPC channel stack.
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
    if set_global:
        trace.set_tracer_provider(provider)
    return provider


class _PassThroughTracer(trace.NoOpTracer):
    """Spans that record nothing and carry their parent's context, or a fresh sampled one for a root.

    The API's no-op tracer already passes a valid parent through; for a root it returns the invalid span,
    which would leave log lines without a trace id and send no ``traceparent`` on. A fresh root carries the
    sampled flag, as the SDK's default sampler (parent-based, always on) would have given it.
    """

    def start_span(
        self, name: str, context: otel_context.Context | None = None, *args: Any, **kwargs: Any
    ) -> trace.Span:
        """Return the parent's span if it is valid, else a new non-recording root."""
        parent = trace.get_current_span(context)
        parent_context = parent.get_span_context()
        if not parent_context.is_valid:
            return trace.NonRecordingSpan(_root_context())
        if isinstance(parent, trace.NonRecordingSpan):
            return parent
        return trace.NonRecordingSpan(parent_context)


def _root_context() -> trace.SpanContext:
    # The SDK's RandomIdGenerator: random bits, never the all-zero (invalid) id.
    return trace.SpanContext(
        trace_id=random.getrandbits(128) or 1,
        span_id=random.getrandbits(64) or 1,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )


class _PassThroughProvider(TracerProvider):
    """The provider :func:`setup_tracing` returns without an endpoint: every tracer is pass-through."""

    _tracer = _PassThroughTracer()

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        """The one pass-through tracer, whatever the instrumentation asks for."""
        return self._tracer


_HEALTH_SERVICE = "grpc.health.v1.Health"


def _not_health(details: grpc.aio.ClientCallDetails) -> bool:
    """The client calls to trace: all but health checks.

    What ``filters.negate(filters.health_check())`` decides, without its per-call ``isinstance`` against
    the typing Protocols of grpc's call details (a costly check, made on every call).
    """
    method: str | bytes = details.method
    return ServerSpans.traces(method.decode() if isinstance(method, bytes) else method)


class ServerSpans:
    """Starts the server span of each call (or, with a pass-through provider, only continues the caller's).

    What the instrumentation's aio server interceptor does (its ``_server.py``, ``_start_span`` and
    ``_set_remote_context``) without its per-call wrappers, so
    :class:`meshcore.interceptors.MeshServerInterceptor` can do tracing, metrics and error mapping in one
    layer. ``grpc.health.v1`` is not traced.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)
        self._recording = not isinstance(self._tracer, trace.NoOpTracer)

    @staticmethod
    def traces(method: str) -> bool:
        """Whether calls of ``method`` (``/pkg.Service/Method``) get a span: all but health checks."""
        # As the instrumentation's filters.health_check(): a service-name prefix match.
        return not method.lstrip("/").startswith(_HEALTH_SERVICE)

    def start(
        self, method: str, context: grpc.aio.ServicerContext[Any, Any]
    ) -> tuple[trace.Span | None, otel_context.Context]:
        """Start the span of a call: (the recording span or None, the context to make current)."""
        metadata = context.invocation_metadata()
        parent = extract(dict(metadata)) if metadata else otel_context.get_current()
        if not is_instrumentation_enabled():
            return None, parent
        if not self._recording:
            span = self._tracer.start_span(method, context=parent)
            return None, trace.set_span_in_context(span, parent)
        span = self._tracer.start_span(
            name=method,
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes=_span_attributes(method, context),
            record_exception=False,
            set_status_on_exception=False,
        )
        return span, trace.set_span_in_context(span, parent)


def _span_attributes(method: str, context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str | int]:
    """The attributes the instrumentation puts on a server span (its ``_server.py``, ``_start_span``).

    Unlike the instrumentation, an empty peer (gRPC reports one for a call whose client already left) is
    not a WARNING "Failed to parse peer address ''": under load, every health check that timed out was.
    """
    attributes: dict[str, str | int] = {
        "rpc.system": "grpc",
        "rpc.grpc.status_code": grpc.StatusCode.OK.value[0],
    }
    if method:
        service, name = method.lstrip("/").split("/", 1)
        attributes.update({"rpc.method": name, "rpc.service": service})
    metadata = dict(context.invocation_metadata() or ())
    if "user-agent" in metadata:
        attributes["rpc.user_agent"] = str(metadata["user-agent"])
    peer = context.peer()
    if not peer.startswith("unix:"):  # ipv4:127.0.0.1:57284, ipv6:[::1]:57284
        ip, _, port = peer.split(",")[0].split(":", 1)[-1].rpartition(":")
        if ip:
            ip = unquote(ip)
            attributes.update({"net.peer.ip": ip, "net.peer.port": port})
            if ip in ("[::1]", "127.0.0.1"):
                attributes["net.peer.name"] = "localhost"
    return attributes


def client_tracing_interceptors(
    tracer_provider: trace.TracerProvider | None = None,
) -> list[grpc.aio.ClientInterceptor]:
    """Return the four OTel aio client interceptors (health checks excluded); None = global provider."""
    interceptors = aio_client_interceptors(tracer_provider=tracer_provider, filter_=_not_health)  # type: ignore[no-untyped-call]
    return cast(list[grpc.aio.ClientInterceptor], interceptors)


def start_span(
    name: str,
    *,
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    attributes: Mapping[str, str | int | float | bool] | None = None,
    parent: trace.SpanContext | None = None,
    links: Sequence[trace.Link] = (),
    new_trace: bool = False,
    tracer_provider: trace.TracerProvider | None = None,
) -> trace.Span:
    """Start (and do not make current) a span; ``parent`` None continues the current context's trace, and
    ``new_trace`` starts a trace of its own whatever is current.

    For work that crosses tasks (a background attempt of a request accepted earlier), pass the span context
    saved with the request as ``parent``: the work joins the request's trace. Work done for several traces at
    once (one call carrying many requests) starts a new trace and ``links`` to each of theirs.
    """
    tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)
    context: otel_context.Context | None = None
    if parent is not None and parent.is_valid:
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    elif new_trace:
        context = otel_context.Context()  # empty: no current span, so the span is a root
    return tracer.start_span(name, context=context, kind=kind, attributes=attributes, links=links)


def traceparent(span_context: trace.SpanContext) -> str:
    """The W3C ``traceparent`` value of ``span_context`` (Trace Context, "traceparent Header"); empty for an
    invalid one. For trace context carried inside a message rather than in call metadata."""
    if not span_context.is_valid:
        return ""
    carrier: dict[str, str] = {}
    _TRACE_CONTEXT.inject(carrier, context=trace.set_span_in_context(trace.NonRecordingSpan(span_context)))
    return carrier.get("traceparent", "")


def parse_traceparent(value: str) -> trace.SpanContext | None:
    """The remote span context a ``traceparent`` value names; None when it is empty or does not parse
    (a peer's bad value costs its trace link, never the request)."""
    if not value:
        return None
    span_context = trace.get_current_span(_TRACE_CONTEXT.extract({"traceparent": value})).get_span_context()
    return span_context if span_context.is_valid else None


async def traced_steps(span: trace.Span, steps: AsyncIterator[T]) -> AsyncIterator[T]:
    """Iterate ``steps`` with ``span`` current around each step, then end ``span``.

    Calls made inside a step (a gRPC client call started by the first ``anext``) become the span's
    children. As in the server interceptor (:mod:`meshcore.interceptors`), the context is attached and
    detached within one step, so closing this generator from another task (its consumer left) cannot
    detach a foreign context.
    An exception from ``steps`` is recorded on the span and marks it as an error.
    """
    current = trace.set_span_in_context(span)
    try:
        while True:
            token = otel_context.attach(current)
            try:
                item = await anext(steps)
            except StopAsyncIteration:
                break
            except Exception as error:
                span.record_exception(error)
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
                raise
            finally:
                otel_context.detach(token)
            yield item
    finally:
        aclose = getattr(steps, "aclose", None)
        token = otel_context.attach(current)
        try:
            if aclose is not None:
                await aclose()
        finally:
            otel_context.detach(token)
            span.end()
