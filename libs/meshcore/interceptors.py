"""grpc.aio server interceptors: go-grpc-prometheus metrics and error mapping.

:func:`meshcore.server.build_server` installs them outermost first as
``[OpenTelemetry, ServerMetricsInterceptor, ErrorInterceptor, *extra]``: the span covers
everything, metrics see the status the error mapping chose, and errors raised by extra
interceptors' wrappers are mapped too.

Both interceptors wrap the handler's behaviour and rebuild the handler (grpc.aio has no other
hook that sees the final status), for all four RPC shapes. Handlers must be ``async def``;
response-streaming ones must be async generators (see :mod:`meshcore.tracing`).
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

from meshcore.codes import go_code_name, status_code_for
from meshcore.deadlines import bind_deadline
from meshcore.errors import MeshError
from meshcore.logging import bind_rpc, trim
from meshcore.metrics import RpcMetrics, ServerMetrics, grpc_type

__all__ = ["INTERNAL_MESSAGE", "ErrorInterceptor", "ServerMetricsInterceptor", "wrap_handler"]

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


class _ObservedContext:
    """The servicer context as seen below the metrics interceptor; records the outcome once.

    ``abort()`` sends the status to the client before the AbortError travels back up through
    the wrapper, so a metric recorded on the way out could lag what the client already saw
    (and a test, or an alert, reading it right after the call would miss it). Recording in
    ``abort()`` itself, before delegating, keeps the metric ahead of the client. Everything
    else is delegated to the real context.
    """

    __slots__ = ("_context", "_done", "_m", "_start")

    def __init__(self, context: Context, m: RpcMetrics) -> None:
        self._context = context
        self._m = m
        self._start = time.perf_counter()
        self._done = False
        m.started()

    def finish(self, code: grpc.StatusCode) -> None:
        if not self._done:
            self._done = True
            self._m.handled(code, time.perf_counter() - self._start)

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> NoReturn:
        self.finish(code)
        await self._context.abort(code, details, trailing_metadata)

    async def abort_with_status(self, status: grpc.Status) -> NoReturn:
        self.finish(status.code)
        await self._context.abort_with_status(status)

    async def write(self, message: Any) -> None:
        # Streaming handlers written in the context.write() style (e.g. grpc.health.v1 Watch) send here.
        self._m.sent()
        await self._context.write(message)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _observe(
    behavior: Behavior, request_streaming: bool, response_streaming: bool, m: RpcMetrics
) -> Behavior:
    """Wrap ``behavior`` so it reports started / messages / handled+latency into ``m``.

    Messages read with ``context.read()`` rather than by iterating the request stream are not
    counted; every handler in the mesh iterates.
    """

    def inbound(request: Any) -> Any:
        if request_streaming:
            return _count_requests(request, m)
        m.received()
        return request

    if response_streaming and not inspect.isasyncgenfunction(behavior):
        # A streaming handler may be a coroutine that sends with context.write() instead of yielding
        # (grpc.aio allows both; the stock health servicer's Watch does this). Keep its shape.

        async def observe_writes(request: Any, context: Context) -> None:
            observed = _ObservedContext(context, m)
            try:
                await behavior(inbound(request), cast("Context", observed))
            except BaseException as exc:
                observed.finish(_code_on_error(exc, context))
                raise
            observed.finish(_code_on_return(context))

        return observe_writes

    if response_streaming:

        async def observe_stream(request: Any, context: Context) -> AsyncIterator[Any]:
            observed = _ObservedContext(context, m)
            try:
                async for response in behavior(inbound(request), cast("Context", observed)):
                    m.sent()
                    yield response
            except BaseException as exc:
                observed.finish(_code_on_error(exc, context))
                raise
            observed.finish(_code_on_return(context))

        return observe_stream

    async def observe_unary(request: Any, context: Context) -> Any:
        observed = _ObservedContext(context, m)
        try:
            response = await behavior(inbound(request), cast("Context", observed))
        except BaseException as exc:
            observed.finish(_code_on_error(exc, context))
            raise
        code = _code_on_return(context)
        if code is grpc.StatusCode.OK:
            m.sent()  # as in Go: a failed unary RPC sent no message
        observed.finish(code)
        return response

    return observe_unary


class ServerMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Feeds the go-grpc-prometheus ``grpc_server_*`` metrics for every RPC shape."""

    def __init__(self, metrics: ServerMetrics | None = None) -> None:
        self._metrics = metrics if metrics is not None else ServerMetrics.for_registry()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        """Wrap the handler for a known method; unknown ones pass through uncounted."""
        handler = await continuation(handler_call_details)
        if handler is None:
            # Not counted: otherwise any client could mint new label values (cardinality attack).
            return None
        m = self._metrics.rpc(
            _method_name(handler_call_details),
            grpc_type(handler.request_streaming, handler.response_streaming),
        )
        return wrap_handler(handler, lambda b, req, resp: _observe(b, req, resp, m))


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


def _guard(behavior: Behavior, response_streaming: bool, method: str, log: logging.Logger) -> Behavior:
    def enter(context: Context) -> None:
        # Each RPC runs in its own task, so these bindings end with the call; no reset needed
        # (and a reset from an async generator finalised elsewhere would raise).
        bind_rpc(method, context.peer())
        bind_deadline(context.time_remaining())

    if response_streaming and inspect.isasyncgenfunction(behavior):

        async def guard_stream(request: Any, context: Context) -> AsyncIterator[Any]:
            enter(context)
            try:
                async for response in behavior(request, context):
                    yield response
            except Exception as exc:
                await _abort_for(exc, context, method, log)

        return guard_stream

    async def guard_unary(request: Any, context: Context) -> Any:
        enter(context)
        try:
            return await behavior(request, context)
        except Exception as exc:
            await _abort_for(exc, context, method, log)

    return guard_unary


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """Maps exceptions from handlers to statuses and binds per-call log and deadline context.

    A :class:`~meshcore.errors.MeshError` becomes ``context.abort(code, message)`` with the code
    from :data:`meshcore.codes.ERROR_CODES`. Any other exception is logged with its traceback and
    becomes INTERNAL with a generic message, so no internals leak to callers and no status goes
    out empty. ``asyncio.CancelledError`` passes through untouched.
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger if logger is not None else _logger

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        """Wrap the handler so its failures are mapped; unknown methods pass through."""
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = _method_name(handler_call_details)
        return wrap_handler(handler, lambda b, _req, resp: _guard(b, resp, method, self._log))
