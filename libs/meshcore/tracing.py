"""OpenTelemetry tracing: one provider per process and the gRPC interceptors that use it.

Spans cross service hops because the client interceptors inject the W3C ``traceparent`` into
call metadata and the server interceptor continues the trace from it. ``grpc.health.v1`` is left
out on both sides: kubelet and the health service poll it every few seconds, and those spans
would drown the traces anyone wants to look at.

Handlers must be ``async def`` (response-streaming ones async generators), and callers must
consume streaming responses with ``async for`` rather than ``call.read()``: the OTel aio
interceptors await unary behaviours and iterate streaming ones.

Response streams are traced by :class:`_StreamSafeServerInterceptor`, not by the instrumentation's
own wrapper. That wrapper holds ``attach``/``detach`` context managers open across its ``yield``:
when a client closes a stream early, gRPC cancels the handler task while the generator is parked at
a ``yield``, and the event loop later closes the abandoned generator from a new task (the asyncgen
finalizer hook, PEP 525), so ``detach`` runs in a different ``contextvars.Context`` than ``attach``
did and OpenTelemetry logs ERROR "Failed to detach context" for every such stream. Ours makes the
span current only around each step of the handler (attach and detach in the same step, so always in
the same context) and ends the span without detaching anything. :func:`traced_steps` does the same for
any async iterator a service drives itself (the edge peer's mailserver requests arrive over RLPx, not gRPC).

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, :func:`setup_tracing` exports every span over OTLP/gRPC; the
``OTEL_BSP_*`` variables of the OpenTelemetry SDK (batch size, schedule delay) apply as documented there.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import unquote

import grpc
import grpc.aio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors, filters
from opentelemetry.instrumentation.grpc._aio_server import (
    OpenTelemetryAioServerInterceptor,
    _OpenTelemetryAioServicerContext,
)
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "client_tracing_interceptors",
    "parse_traceparent",
    "server_tracing_interceptor",
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
    """Return the OTel aio server interceptor (health checks excluded); None uses the global provider.

    Response streams are traced step by step (see the module docstring).
    """
    # What the instrumentation's aio_server_interceptor() builds, with our stream wrapper.
    tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)
    return _StreamSafeServerInterceptor(tracer, filter_=_not_health())  # type: ignore[no-untyped-call]


def _span_attributes(method: str, context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str | int]:
    """The attributes the instrumentation puts on a server span (its ``_server.py``, ``_start_span``)."""
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


class _StreamSafeServerInterceptor(OpenTelemetryAioServerInterceptor):
    """The instrumentation's aio server interceptor with response streams traced step by step.

    Unary responses keep the instrumentation's wrapper: a coroutine starts and ends in one task.
    """

    def _start_span(
        self,
        handler_call_details: grpc.HandlerCallDetails,
        context: grpc.aio.ServicerContext[Any, Any],
        set_status_on_exception: bool = False,
    ) -> Any:
        """The instrumentation's unary span, with the attributes of :func:`_span_attributes`.

        Its own version logs WARNING "Failed to parse peer address ''" for a call whose client already left
        (gRPC then reports an empty peer): under load, every health check that timed out did.
        """
        method = handler_call_details.method
        method = method.decode() if isinstance(method, bytes) else method
        return self._tracer.start_as_current_span(
            name=method,
            kind=trace.SpanKind.SERVER,
            attributes=_span_attributes(method, context),
            set_status_on_exception=set_status_on_exception,
        )

    def _intercept_aio_server_stream(
        self,
        behavior: Callable[..., AsyncGenerator[Any, None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Callable[..., AsyncGenerator[Any, None]]:
        method = handler_call_details.method
        method = method.decode() if isinstance(method, bytes) else method

        async def traced_stream(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncGenerator[Any, None]:
            metadata = context.invocation_metadata()
            parent = extract(dict(metadata)) if metadata else otel_context.get_current()
            span = self._tracer.start_span(
                name=method,
                context=parent,
                kind=trace.SpanKind.SERVER,
                attributes=_span_attributes(method, context),
                set_status_on_exception=False,
            )
            current = trace.set_span_in_context(span, parent)
            wrapped = _OpenTelemetryAioServicerContext(context, span)  # type: ignore[no-untyped-call]
            responses = behavior(request, wrapped)
            try:
                while True:
                    # Attach and detach within one step: both run in the caller's context, whichever
                    # task that is (the handler task, or the loop's finalizer after an early close).
                    token = otel_context.attach(current)
                    try:
                        response = await anext(responses)
                    except StopAsyncIteration:
                        break
                    finally:
                        otel_context.detach(token)
                    yield response
            except Exception as error:
                if type(error) is not Exception:  # as the instrumentation: bare Exception = an abort
                    span.record_exception(error)
                raise
            finally:
                token = otel_context.attach(current)
                try:
                    await responses.aclose()  # run the handler's own clean-up now, inside its span
                finally:
                    otel_context.detach(token)
                    span.end()

        return traced_stream


def client_tracing_interceptors(
    tracer_provider: trace.TracerProvider | None = None,
) -> list[grpc.aio.ClientInterceptor]:
    """Return the four OTel aio client interceptors (health checks excluded); None = global provider."""
    interceptors = aio_client_interceptors(tracer_provider=tracer_provider, filter_=_not_health())  # type: ignore[no-untyped-call]
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
    children. As in the server interceptor above, the context is attached and detached within one step,
    so closing this generator from another task (its consumer left) cannot detach a foreign context.
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
