"""Client channels to other Mailmesh services, and errors coming back from them.

:func:`make_channel` gives a ``grpc.aio`` channel with a default deadline on every call, a JSON
service config (round-robin over the service's replicas, retry policy for the methods the caller
declares idempotent, retry throttling), keepalive, message-size limits, and the OpenTelemetry and
go-grpc-prometheus client interceptors. Its target may list several replicas or name them by one DNS
name (:mod:`meshcore.balancing`).

The default deadline is applied by a client interceptor, not by the service config's ``timeout``:
grpcio (C-core, seen in 1.85.1; grpc/grpc issues #34547 and #40633) fails calls at once with
DEADLINE_EXCEEDED when a service-config timeout is about a second or less, which broke the health
service's 0.5 s checks. A service's
``clients.py`` wraps generated stubs over it, passes ``timeout=remaining_timeout(...)`` on every
call (:mod:`meshcore.deadlines`), and turns failures into our errors::

    try:
        reply = await self._stub.Put(request, timeout=remaining_timeout(self._timeout_s))
    except grpc.aio.AioRpcError as err:
        raise translate_rpc_error(err) from err

Consume streaming responses with ``async for`` (not ``call.read()``) and pass bidi requests as
an iterator: the client interceptors hand back iterators, not raw calls.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from typing import Any

import grpc
import grpc.aio
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from meshcore.balancing import channel_target, client_keepalive_options
from meshcore.codes import error_class_for, go_code_name
from meshcore.errors import MeshError
from meshcore.metrics import ClientMetrics, RpcMetrics
from meshcore.security import ChannelSecurity, channel_security
from meshcore.tracing import client_tracing_interceptors

__all__ = [
    "MAX_RETRY_ATTEMPTS",
    "client_metrics_interceptors",
    "default_deadline_interceptors",
    "make_channel",
    "service_config",
    "translate_rpc_error",
]

MAX_RETRY_ATTEMPTS = 5
"""gRPC caps ``maxAttempts`` at 5 (gRFC A6); a larger value would be silently lowered."""


def _duration(seconds: float) -> str:
    # google.protobuf.Duration JSON form, which service configs require ("0.1s", "2s").
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


def service_config(
    service_name: str,
    *,
    timeout_s: float,
    retry_attempts: int = 1,
    retryable_codes: Sequence[str | grpc.StatusCode] = ("UNAVAILABLE",),
    idempotent_methods: Sequence[str] = (),
    initial_backoff_s: float = 0.1,
    max_backoff_s: float = 1.0,
    load_balancing: str | None = "round_robin",
) -> dict[str, Any]:
    """Build the gRPC service config :func:`make_channel` uses (exposed for inspection and tests).

    Only ``idempotent_methods`` get the retry policy, because retrying a non-idempotent call can
    apply it twice. ``timeout_s`` is validated here but applied by :func:`make_channel`'s deadline
    interceptor (see the module docstring for why the config carries no ``timeout``). ``load_balancing``
    None leaves gRPC's default (``pick_first``: every call to the first address that connects).
    """
    if timeout_s <= 0:
        raise ValueError("timeout_s must be > 0")
    if not 1 <= retry_attempts <= MAX_RETRY_ATTEMPTS:
        raise ValueError(f"retry_attempts must be 1..{MAX_RETRY_ATTEMPTS} (attempts including the first)")
    if retry_attempts > 1 and not idempotent_methods:
        raise ValueError("retry_attempts > 1 needs idempotent_methods: only idempotent calls may be retried")
    codes = [c.name if isinstance(c, grpc.StatusCode) else c.upper() for c in retryable_codes]
    unknown = [c for c in codes if c not in grpc.StatusCode.__members__ or c == "OK"]
    if unknown:
        raise ValueError(f"not retryable status codes: {', '.join(unknown)}")
    method_config: list[dict[str, Any]] = []
    if retry_attempts > 1:
        method_config.append(
            {
                "name": [{"service": service_name, "method": m} for m in idempotent_methods],
                "retryPolicy": {
                    "maxAttempts": retry_attempts,
                    "initialBackoff": _duration(initial_backoff_s),
                    "maxBackoff": _duration(max_backoff_s),
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": codes,
                },
            }
        )
    config: dict[str, Any] = {"methodConfig": method_config}
    if retry_attempts > 1:
        # Stop retrying when most calls fail (gRFC A6 throttling): retries against an
        # overloaded or dead service only multiply its load.
        config["retryThrottling"] = {"maxTokens": 10, "tokenRatio": 0.1}
    if load_balancing is not None:
        # round_robin over every address of the target (a list of replicas, or a headless Service's DNS
        # name) spreads calls over the replicas and skips those whose connection is down.
        config["loadBalancingConfig"] = [{load_balancing: {}}]
    return config


def make_channel(
    target: str,
    *,
    service_name: str,
    timeout_s: float,
    retry_attempts: int = 1,
    retryable_codes: Sequence[str | grpc.StatusCode] = ("UNAVAILABLE",),
    idempotent_methods: Sequence[str] = (),
    initial_backoff_s: float = 0.1,
    max_backoff_s: float = 1.0,
    load_balancing: str | None = "round_robin",
    max_message_bytes: int = 16 * 1024 * 1024,
    tracer_provider: trace.TracerProvider | None = None,
    registry: CollectorRegistry = REGISTRY,
    interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
    options: Sequence[tuple[str, Any]] = (),
    security: ChannelSecurity | None = None,
) -> grpc.aio.Channel:
    """Open a ``grpc.aio`` channel to ``target`` for calls to ``service_name``.

    ``security`` (None = the process default, :func:`meshcore.security.channel_security`) makes it mutual
    TLS and adds the bearer token when configured.

    ``target`` is an address setting's value (:func:`meshcore.balancing.channel_target`): one
    ``host:port``, several ``ip:port`` of the service's replicas, or a gRPC URI; calls are balanced over
    its addresses by ``load_balancing``. ``retry_attempts`` counts the first attempt (1 = no retries, at
    most 5) and applies only to ``idempotent_methods``, retried on ``retryable_codes`` with exponential
    backoff, each attempt free to land on another replica, all within the call's one deadline. Keepalive is
    the process's (:func:`meshcore.balancing.current_keepalive`). Metrics go to ``registry``;
    ``tracer_provider`` None means the global one. Close the channel when done.
    """
    config = service_config(
        service_name,
        timeout_s=timeout_s,
        retry_attempts=retry_attempts,
        retryable_codes=retryable_codes,
        idempotent_methods=idempotent_methods,
        initial_backoff_s=initial_backoff_s,
        max_backoff_s=max_backoff_s,
        load_balancing=load_balancing,
    )
    chain: list[grpc.aio.ClientInterceptor] = [
        *default_deadline_interceptors(timeout_s),
        *client_tracing_interceptors(tracer_provider),
        *client_metrics_interceptors(ClientMetrics.for_registry(registry)),
        *interceptors,
    ]
    return (security or channel_security()).channel(
        channel_target(target),
        options=[
            ("grpc.service_config", json.dumps(config)),
            ("grpc.enable_retries", 1),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            *client_keepalive_options(),
            *options,
        ],
        interceptors=chain,
    )


def _with_default(details: grpc.aio.ClientCallDetails, timeout_s: float) -> grpc.aio.ClientCallDetails:
    if details.timeout is not None:
        return details
    return grpc.aio.ClientCallDetails(
        details.method, timeout_s, details.metadata, details.credentials, details.wait_for_ready
    )


class _DefaultDeadline:
    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s


class _UnaryUnaryDeadline(_DefaultDeadline, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_default(details, self._timeout_s), request)


class _UnaryStreamDeadline(_DefaultDeadline, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_default(details, self._timeout_s), request)


class _StreamUnaryDeadline(_DefaultDeadline, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(_with_default(details, self._timeout_s), requests)


class _StreamStreamDeadline(_DefaultDeadline, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(_with_default(details, self._timeout_s), requests)


def default_deadline_interceptors(timeout_s: float) -> list[grpc.aio.ClientInterceptor]:
    """Give every call without a ``timeout=`` the deadline ``timeout_s`` (one interceptor per call kind)."""
    return [
        _UnaryUnaryDeadline(timeout_s),
        _UnaryStreamDeadline(timeout_s),
        _StreamUnaryDeadline(timeout_s),
        _StreamStreamDeadline(timeout_s),
    ]


def translate_rpc_error(err: grpc.aio.AioRpcError) -> MeshError:
    """Map a failed call's status to our error category (``UNAVAILABLE`` → ``Unavailable`` …).

    The remote message is kept; ``details["grpc_code"]`` records the original code. Use as
    ``raise translate_rpc_error(err) from err`` so the chain keeps the gRPC error.
    """
    code = err.code()
    return error_class_for(code)(err.details() or "", {"grpc_code": go_code_name(code)})


# ------------------------------------------------------------------------------ client metrics


def _method_name(details: grpc.aio.ClientCallDetails) -> str:
    method: str | bytes = details.method
    return method.decode() if isinstance(method, bytes) else method  # grpc passes bytes here


async def _count_sent(requests: AsyncIterable[Any] | Iterable[Any], m: RpcMetrics) -> AsyncIterator[Any]:
    if isinstance(requests, AsyncIterable):
        async for request in requests:
            m.sent()
            yield request
    else:
        for request in requests:
            m.sent()
            yield request


async def _finish_unary(call: Any, m: RpcMetrics, start: float) -> Any:
    try:
        code: grpc.StatusCode = await call.code()
    except asyncio.CancelledError:
        call.cancel()
        m.handled(grpc.StatusCode.CANCELLED, time.perf_counter() - start)
        raise
    if code is grpc.StatusCode.OK:
        m.received()
    m.handled(code, time.perf_counter() - start)
    return call


_recording: set[asyncio.Task[None]] = set()  # recordings in flight (the loop holds tasks only weakly)


class _Handled:
    """Records a stream's ``handled`` once: when its reader sees the end, or when the call ends unread.

    A caller may stop reading a response stream once it has what it wants (the edge peer stops at history's
    completion message) and cancel the call, or simply drop it; its iterator below then never resumes, so
    without the call's done callback the RPC would never be counted as handled.
    """

    __slots__ = ("_m", "_start", "done")

    def __init__(self, call: Any, m: RpcMetrics, start: float) -> None:
        self._m, self._start, self.done = m, start, False
        call.add_done_callback(self._call_ended)

    def record(self, code: grpc.StatusCode) -> None:
        if not self.done:
            self.done = True
            self._m.handled(code, time.perf_counter() - self._start)

    def _call_ended(self, call: Any) -> None:
        if self.done:
            return
        if call.cancelled():
            self.record(grpc.StatusCode.CANCELLED)
            return
        task = asyncio.get_running_loop().create_task(self._record_status(call))  # code() is a coroutine
        _recording.add(task)
        task.add_done_callback(_recording.discard)

    async def _record_status(self, call: Any) -> None:
        self.record(await call.code())


async def _observe_responses(call: Any, m: RpcMetrics, start: float) -> AsyncIterator[Any]:
    handled = _Handled(call, m, start)
    try:
        async for response in call:
            m.received()
            yield response
    except (GeneratorExit, asyncio.CancelledError):
        # The caller stopped reading or was cancelled: end the call rather than leave it open.
        call.cancel()
        handled.record(grpc.StatusCode.CANCELLED)
        raise
    finally:
        if not handled.done:
            handled.record(await call.code())


class _ClientMetricsBase:
    def __init__(self, metrics: ClientMetrics) -> None:
        self._metrics = metrics

    def _begin(self, details: grpc.aio.ClientCallDetails, rpc_type: str) -> tuple[RpcMetrics, float]:
        m = self._metrics.rpc(_method_name(details), rpc_type)
        m.started()
        return m, time.perf_counter()


class _UnaryUnaryMetrics(_ClientMetricsBase, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        m, start = self._begin(client_call_details, "unary")
        call = await continuation(client_call_details, request)
        m.sent()
        return await _finish_unary(call, m, start)


class _UnaryStreamMetrics(_ClientMetricsBase, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        m, start = self._begin(client_call_details, "server_stream")
        call = await continuation(client_call_details, request)
        m.sent()
        return _observe_responses(call, m, start)


class _StreamUnaryMetrics(_ClientMetricsBase, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        m, start = self._begin(client_call_details, "client_stream")
        call = await continuation(client_call_details, _count_sent(request_iterator, m))
        return await _finish_unary(call, m, start)


class _StreamStreamMetrics(_ClientMetricsBase, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        m, start = self._begin(client_call_details, "bidi_stream")
        call = await continuation(client_call_details, _count_sent(request_iterator, m))
        return _observe_responses(call, m, start)


def client_metrics_interceptors(metrics: ClientMetrics | None = None) -> list[grpc.aio.ClientInterceptor]:
    """Return the four aio client interceptors feeding the ``grpc_client_*`` metrics.

    Four objects, not one: a channel files each interceptor under the first of the four
    interceptor types it is an instance of.
    """
    metrics = metrics if metrics is not None else ClientMetrics.for_registry()
    return [
        _UnaryUnaryMetrics(metrics),
        _UnaryStreamMetrics(metrics),
        _StreamUnaryMetrics(metrics),
        _StreamStreamMetrics(metrics),
    ]
