"""The shared grpc.aio server interceptor: tracing, go-grpc-prometheus metrics and error mapping in one layer.

:func:`meshcore.server.build_server` installs :class:`MeshServerInterceptor` outermost, before the optional
auth interceptors and a service's own. For each call it does, outermost first, what used to be three
interceptors: the span (or, without an exporter, the caller's trace context) covers everything; the
metrics see the status the error mapping chose; errors raised by inner interceptors' wrappers are mapped
too. One layer instead of three: every grpc.aio interceptor is two coroutines and a rebuilt handler per
call, and a span with the instrumentation's per-call filter and context proxy cost more than the handler of
a cheap RPC (docs/benchmarks.md "The send service (issue 11)"). The wrapped handler of each method is built
once and reused while the handler below stays the same object.

Handlers must be ``async def``; response-streaming ones must be async generators (a coroutine that writes
with ``context.write()``, as the stock health servicer's Watch, is supported untraced). Response streams are
traced step by step: the span is made current around each step of the handler (attach and detach in the
same step, so always in the same ``contextvars.Context``) and ended without detaching anything. The
instrumentation's own wrapper held ``attach``/``detach`` open across its ``yield``: when a client closes a
stream early, gRPC cancels the handler task while the generator is parked at a ``yield``, the event loop
later closes the abandoned generator from a new task (the asyncgen finalizer hook, PEP 525), so ``detach``
ran in another context than ``attach`` and OpenTelemetry logged ERROR "Failed to detach context" for every
such stream.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeAlias, cast

import grpc
import grpc.aio
from opentelemetry import context as otel_context
from opentelemetry import trace

from meshcore.codes import go_code_name, status_code_for
from meshcore.deadlines import bind_deadline
from meshcore.errors import MeshError
from meshcore.logging import bind_rpc, trim
from meshcore.metrics import RpcMetrics, ServerMetrics, grpc_type
from meshcore.tracing import ServerSpans

__all__ = ["INTERNAL_MESSAGE", "MeshServerInterceptor", "wrap_handler"]

INTERNAL_MESSAGE = "internal error"
"""What a caller is told about an unexpected exception; the details stay in our log."""

# Strings: the grpc classes are generic only in their type stubs, not at run time.
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
Behavior: TypeAlias = Callable[[Any, Context], Any]
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
# (behaviour, request_streaming, response_streaming) -> new behaviour of the same shape.
BehaviorWrapper = Callable[[Behavior, bool, bool], Behavior]

_logger = logging.getLogger(__name__)

# How loudly a mapped error is logged. Caller mistakes stay at DEBUG: at INFO a misbehaving
# client could fill the log. Our own failures and overload are worth an operator's attention.
_LOG_LEVEL_BY_CODE = {
    grpc.StatusCode.INTERNAL: logging.ERROR,
    grpc.StatusCode.UNAVAILABLE: logging.WARNING,
    grpc.StatusCode.DEADLINE_EXCEEDED: logging.WARNING,
    grpc.StatusCode.RESOURCE_EXHAUSTED: logging.WARNING,
}


def wrap_handler(handler: Handler, wrapper: BehaviorWrapper) -> Handler:
    """Return ``handler`` rebuilt with its behaviour passed through ``wrapper``.

    Keeps the (de)serializers, so an interceptor can observe or guard any of the four RPC shapes.
    """
    req, resp = handler.request_streaming, handler.response_streaming
    # Any: the grpc stubs type behaviours as synchronous callables, ours are coroutines.
    behavior: Any
    if req and resp:
        behavior, factory = handler.stream_stream, grpc.stream_stream_rpc_method_handler
    elif req:
        behavior, factory = handler.stream_unary, grpc.stream_unary_rpc_method_handler
    elif resp:
        behavior, factory = handler.unary_stream, grpc.unary_stream_rpc_method_handler
    else:
        behavior, factory = handler.unary_unary, grpc.unary_unary_rpc_method_handler
    assert behavior is not None  # grpc guarantees the behaviour matching the flags
    return factory(
        wrapper(behavior, req, resp),
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def _method_name(details: grpc.HandlerCallDetails) -> str:
    method: str | bytes = details.method
    return method.decode() if isinstance(method, bytes) else method


# --------------------------------------------------------------------------------------- metrics


def _code_on_return(context: Context) -> grpc.StatusCode:
    code = context.code()  # None unless the handler called set_code()
    return code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.OK


def _code_on_error(exc: BaseException, context: Context) -> grpc.StatusCode:
    if isinstance(exc, grpc.aio.AbortError):
        return _code_on_return(context)
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        # gRPC cancels the handler task both when the client gives up and when the deadline
        # passes; only the time left tells the two apart.
        left = context.time_remaining()
        return (
            grpc.StatusCode.DEADLINE_EXCEEDED if left is not None and left <= 0 else grpc.StatusCode.CANCELLED
        )
    return grpc.StatusCode.UNKNOWN  # what grpc itself reports for an exception it did not expect


async def _count_requests(requests: AsyncIterator[Any], m: RpcMetrics) -> AsyncIterator[Any]:
    async for request in requests:
        m.received()
        yield request


class _CallContext:
    """The servicer context as the handler sees it: records the outcome once, on the span too.

    ``abort()`` sends the status to the client before the AbortError travels back up through the
    wrapper, so a metric recorded on the way out could lag what the client already saw (and a test, or
    an alert, reading it right after the call would miss it). Recording in ``abort()`` itself, before
    delegating, keeps the metric ahead of the client. The span gets the code (``rpc.grpc.status_code``)
    and, for server faults, an error status, as the instrumentation's context wrapper (its
    ``_aio_server.py``) sets them. Everything else is delegated to the real context.
    """

    __slots__ = ("_code", "_context", "_details", "_done", "_m", "_start", "span")

    def __init__(self, context: Context, m: RpcMetrics, span: trace.Span | None) -> None:
        self._context = context
        self._m = m
        self.span = span
        """The call's recording span, or None (not traced, or nothing records)."""
        self._code = grpc.StatusCode.OK
        self._details: str | None = None
        self._done = False
        m.started()
        self._start = time.perf_counter()

    def finish(self, code: grpc.StatusCode) -> None:
        """Count the call as handled with ``code`` (the first time only)."""
        if not self._done:
            self._done = True
            self._m.handled(code, time.perf_counter() - self._start)

    def _on_span(self, code: grpc.StatusCode, details: str) -> None:
        if self.span is not None:
            self.span.set_attribute("rpc.grpc.status_code", code.value[0])
            if code in _SPAN_ERROR_CODES:
                self.span.set_status(trace.Status(trace.StatusCode.ERROR, f"{code}:{details}"))

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> NoReturn:
        """Record the outcome, then end the call with ``code``."""
        self._on_span(code, details)
        self.finish(code)
        await self._context.abort(code, details, trailing_metadata)

    async def abort_with_status(self, status: grpc.Status) -> NoReturn:
        """Record the outcome, then end the call with ``status``."""
        self.finish(status.code)
        await self._context.abort_with_status(status)

    def set_code(self, code: grpc.StatusCode) -> None:
        """Set the code the call will end with (the span learns it now)."""
        self._code = code
        self._on_span(code, self._details or code.value[1])
        self._context.set_code(code)

    def set_details(self, details: str) -> None:
        """Set the status message the call will end with."""
        self._details = details
        if self._code is not grpc.StatusCode.OK:
            self._on_span(self._code, details)
        self._context.set_details(details)

    async def write(self, message: Any) -> None:
        """Send one response (streaming handlers in the ``context.write()`` style, e.g. health Watch)."""
        self._m.sent()
        await self._context.write(message)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


# The codes the instrumentation marks a server span as failed for (its ``_utilities.py``, ``_server_status``):
# the server's faults, not the caller's.
_SPAN_ERROR_CODES = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


def _record(span: trace.Span | None, exc: BaseException) -> None:
    # As the instrumentation: only real errors, not cancellation and not an abort (its status is on the span).
    if span is not None and isinstance(exc, Exception) and not isinstance(exc, grpc.aio.AbortError):
        span.record_exception(exc)


# ---------------------------------------------------------------------------------------- errors


async def _abort_for(exc: Exception, context: Context, method: str, log: logging.Logger) -> NoReturn:
    """Turn ``exc`` into the call's status. The one place a handler failure becomes a code."""
    if isinstance(exc, grpc.aio.AbortError):
        raise exc  # the handler chose its status itself (e.g. the stock health servicer)
    if isinstance(exc, MeshError):
        code = status_code_for(exc)
        level = _LOG_LEVEL_BY_CODE.get(code, logging.DEBUG)
        if log.isEnabledFor(level):
            log.log(
                level,
                "%s failed: %s",
                method,
                trim(exc.message),
                extra={
                    "error": type(exc).__name__,
                    "grpc_code": go_code_name(code),
                    "details": {k: trim(v) for k, v in exc.details.items()},
                },
                exc_info=exc if code is grpc.StatusCode.INTERNAL else None,
            )
        await context.abort(code, exc.message)
    if context.cancelled():
        # The client left (or its deadline passed) while the handler was still writing: grpc fails the pending
        # write (ExecuteBatchError) inside the handler. Nobody is there to receive a status, and it is no
        # fault of ours: end the call as cancelled, quietly (seen when an RLPx peer drops mid-history).
        log.debug("%s: client gone (%s)", method, type(exc).__name__)
        raise asyncio.CancelledError from exc
    log.error("%s: unhandled %s", method, type(exc).__name__, exc_info=exc, extra={"grpc_code": "Internal"})
    await context.abort(grpc.StatusCode.INTERNAL, INTERNAL_MESSAGE)


# ------------------------------------------------------------------------------------ one method


class _Method:
    """What the interceptor knows of one method: its name, metric children, span source and logger."""

    __slots__ = ("log", "m", "name", "spans")

    def __init__(self, name: str, m: RpcMetrics, spans: ServerSpans | None, log: logging.Logger) -> None:
        self.name = name
        self.m = m
        self.spans = spans  # None: not traced (health checks)
        self.log = log

    def begin(self, context: Context) -> tuple[_CallContext, otel_context.Context | None]:
        """Start a call: its span (and the trace context to make current), metrics, log and deadline."""
        span, current = self.spans.start(self.name, context) if self.spans is not None else (None, None)
        call = _CallContext(context, self.m, span)
        # Each RPC runs in its own task, so these bindings end with the call; no reset needed
        # (and a reset from an async generator finalised elsewhere would raise).
        bind_rpc(self.name, context.peer())
        bind_deadline(context.time_remaining())
        return call, current

    def inbound(self, request: Any, request_streaming: bool) -> Any:
        """The request as the handler gets it; each streamed request is counted as it is read.

        Messages read with ``context.read()`` rather than by iterating the request stream are not
        counted; every handler in the mesh iterates.
        """
        if request_streaming:
            return _count_requests(request, self.m)
        self.m.received()
        return request

    def wrap(self, behavior: Behavior, request_streaming: bool, response_streaming: bool) -> Behavior:
        """Return ``behavior`` traced, measured and with its failures mapped, in the same shape."""
        if response_streaming and inspect.isasyncgenfunction(behavior):
            return self._stream(behavior, request_streaming)
        return self._unary(behavior, request_streaming, response_streaming)

    def _unary(self, behavior: Behavior, request_streaming: bool, response_streaming: bool) -> Behavior:
        async def unary(request: Any, context: Context) -> Any:
            call, current = self.begin(context)
            token = otel_context.attach(current) if current is not None else None
            try:
                try:
                    response = await behavior(self.inbound(request, request_streaming), cast("Context", call))
                except Exception as exc:
                    await _abort_for(exc, cast("Context", call), self.name, self.log)
                code = _code_on_return(context)
                if code is grpc.StatusCode.OK and not response_streaming:
                    self.m.sent()  # as in Go: a failed unary RPC sent no message
                call.finish(code)
                return response
            except BaseException as exc:
                call.finish(_code_on_error(exc, context))
                _record(call.span, exc)
                raise
            finally:
                if call.span is not None:
                    call.span.end()
                if token is not None:
                    otel_context.detach(token)

        return unary

    def _stream(self, behavior: Behavior, request_streaming: bool) -> Behavior:
        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            call, current = self.begin(context)
            responses = behavior(self.inbound(request, request_streaming), cast("Context", call))
            try:
                try:
                    while True:
                        # Attach and detach within one step: both run in the caller's context, whichever
                        # task that is (the handler task, or the loop's finalizer after an early close).
                        token = otel_context.attach(current) if current is not None else None
                        try:
                            response = await anext(responses)
                        except StopAsyncIteration:
                            break
                        finally:
                            if token is not None:
                                otel_context.detach(token)
                        self.m.sent()
                        yield response
                except Exception as exc:
                    await _abort_for(exc, cast("Context", call), self.name, self.log)
                call.finish(_code_on_return(context))
            except BaseException as exc:
                call.finish(_code_on_error(exc, context))
                _record(call.span, exc)
                raise
            finally:
                token = otel_context.attach(current) if current is not None else None
                try:
                    await responses.aclose()  # run the handler's own clean-up now, inside its span
                finally:
                    if token is not None:
                        otel_context.detach(token)
                    if call.span is not None:
                        call.span.end()

        return stream


class MeshServerInterceptor(grpc.aio.ServerInterceptor):
    """Tracing, ``grpc_server_*`` metrics and error mapping for every RPC shape, as one interceptor.

    A :class:`~meshcore.errors.MeshError` becomes ``context.abort(code, message)`` with the code from
    :data:`meshcore.codes.ERROR_CODES`. Any other exception is logged with its traceback and becomes
    INTERNAL with a generic message, so no internals leak to callers and no status goes out empty.
    ``asyncio.CancelledError`` passes through untouched. Unknown methods pass through uncounted.
    """

    def __init__(
        self,
        metrics: ServerMetrics | None = None,
        spans: ServerSpans | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self._metrics = metrics if metrics is not None else ServerMetrics.for_registry()
        self.spans = spans if spans is not None else ServerSpans()
        self._log = logger if logger is not None else _logger
        # method -> (the handler below, our wrapper of it); bounded by the methods served.
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        """Wrap the handler of a known method; unknown ones pass through."""
        handler = await continuation(handler_call_details)
        if handler is None:
            # Not counted: otherwise any client could mint new label values (cardinality attack).
            return None
        name = _method_name(handler_call_details)
        known = self._wrapped.get(name)
        if known is not None and known[0] is handler:
            return known[1]
        m = self._metrics.rpc(name, grpc_type(handler.request_streaming, handler.response_streaming))
        method = _Method(name, m, self.spans if ServerSpans.traces(name) else None, self._log)
        wrapped = wrap_handler(handler, method.wrap)
        self._wrapped[name] = (handler, wrapped)
        return wrapped
