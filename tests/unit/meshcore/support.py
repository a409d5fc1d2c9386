"""Test support for meshcore: a protobuf-free service (raw bytes, all four RPC shapes) and helpers.

Requests of the form ``raise:<Name>`` make any method raise: a MeshError category by name, or
``ValueError`` (an unexpected exception). ``Block`` waits until the test releases it, which is
how in-flight calls are held open without sleeping.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from meshcore import errors
from meshcore.config import RuntimeConfig
from meshcore.server import MeshServer, Registration

SERVICE = "meshcore.test.v1.Raw"
SECRET = "db password is hunter2"  # an unexpected exception's text, which must never leak


def identity(data: bytes) -> bytes:
    """Raw-bytes (de)serializer: the message is the payload."""
    return data


def _maybe_raise(request: bytes) -> None:
    if not request.startswith(b"raise:"):
        return
    name = request[len(b"raise:") :].decode()
    if name == "ValueError":
        raise ValueError(SECRET)
    category: type[errors.MeshError] = getattr(errors, name)
    raise category(f"{name} from handler", {"request": request})


class RawService:
    """Handlers for the four RPC shapes plus ``Block``, a fail-N-times ``Flaky`` and an ``Endless`` stream."""

    def __init__(self) -> None:
        self.block_started = asyncio.Event()
        self.release = asyncio.Event()
        self.flaky_failures = 0
        self.flaky_attempts = 0
        self.block_time_remaining: float | None = None
        self.echoed = 0

    async def echo(self, request: bytes, context: Any) -> bytes:
        _maybe_raise(request)
        self.echoed += 1
        return request

    async def repeat(self, request: bytes, context: Any) -> AsyncIterator[bytes]:
        # First yield, then fail: statuses after partial output must still map correctly.
        for i in range(3):
            yield request + b"#" + str(i).encode()
            _maybe_raise(request)

    async def collect(self, requests: AsyncIterator[bytes], context: Any) -> bytes:
        parts = [r async for r in requests]
        for part in parts:
            _maybe_raise(part)
        return b"|".join(parts)

    async def chat(self, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for request in requests:
            _maybe_raise(request)
            yield request.upper()

    async def endless(self, request: bytes, context: Any) -> AsyncIterator[bytes]:
        # Until the client goes away: the generator is suspended at a yield when the call is cancelled.
        while True:
            yield request * 1024

    async def block(self, request: bytes, context: Any) -> bytes:
        self.block_time_remaining = context.time_remaining()
        self.block_started.set()
        await self.release.wait()
        return b"released"

    async def flaky(self, request: bytes, context: Any) -> bytes:
        self.flaky_attempts += 1
        if self.flaky_attempts <= self.flaky_failures:
            raise errors.Unavailable("try again")
        return b"ok after %d" % self.flaky_attempts

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """Register the handlers under :data:`SERVICE` with identity (de)serializers."""

        def unary(fn: Callable[..., Any]) -> grpc.RpcMethodHandler[bytes, bytes]:
            return grpc.unary_unary_rpc_method_handler(fn, identity, identity)

        handlers = {
            "Echo": unary(self.echo),
            "Block": unary(self.block),
            "Flaky": unary(self.flaky),
            "Flaky2": unary(self.flaky),
            "Repeat": grpc.unary_stream_rpc_method_handler(self.repeat, identity, identity),
            "Endless": grpc.unary_stream_rpc_method_handler(self.endless, identity, identity),
            "Collect": grpc.stream_unary_rpc_method_handler(self.collect, identity, identity),
            "Chat": grpc.stream_stream_rpc_method_handler(self.chat, identity, identity),
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])

    def registration(self) -> Registration:
        """This service as a :class:`meshcore.server.Registration`."""
        return Registration(SERVICE, self.add_to_server)


def method(name: str) -> str:
    """The full method path of ``name`` on the raw service."""
    return f"/{SERVICE}/{name}"


def runtime_for_tests(**overrides: Any) -> RuntimeConfig:
    """A RuntimeConfig on loopback with an ephemeral gRPC port and no metrics endpoint."""
    base = RuntimeConfig(
        service_name="test", grpc_host="127.0.0.1", grpc_port=0, metrics_port=-1, shutdown_grace_s=5.0
    )
    return dataclasses.replace(base, **overrides)


def unary(channel: grpc.aio.Channel, name: str) -> grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]:
    """A typed unary callable for raw-service method ``name``."""
    return channel.unary_unary(method(name), identity, identity)


def server_stream(channel: grpc.aio.Channel, name: str) -> grpc.aio.UnaryStreamMultiCallable[bytes, bytes]:
    """A typed server-streaming callable for raw-service method ``name``."""
    return channel.unary_stream(method(name), identity, identity)


def client_stream(channel: grpc.aio.Channel, name: str) -> grpc.aio.StreamUnaryMultiCallable[bytes, bytes]:
    """A typed client-streaming callable for raw-service method ``name``."""
    return channel.stream_unary(method(name), identity, identity)


def bidi(channel: grpc.aio.Channel, name: str) -> grpc.aio.StreamStreamMultiCallable[bytes, bytes]:
    """A typed bidirectional-streaming callable for raw-service method ``name``."""
    return channel.stream_stream(method(name), identity, identity)


class AwaitableSpanExporter(InMemorySpanExporter):
    """An in-memory exporter a test can await: ``await exporter.wait_for(n)``.

    A span can end after the client has its answer (an aborted call's server span ends once
    the abort has unwound), so tests wait for the spans they expect instead of reading early.
    """

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        for loop, event in self._waiters:
            loop.call_soon_threadsafe(event.set)  # spans may end on exporter or gRPC threads
        return result

    async def wait_for(self, count: int, timeout: float = 10.0) -> tuple[ReadableSpan, ...]:
        """Return the finished spans once there are at least ``count`` of them."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                while len(self.get_finished_spans()) < count:
                    event.clear()
                    await event.wait()
        finally:
            self._waiters.remove(waiter)
        return self.get_finished_spans()


@dataclass
class Running:
    """A started raw service and a mesh channel to it."""

    service: RawService
    mesh: MeshServer
    channel: grpc.aio.Channel
    registry: CollectorRegistry
    tracer_provider: TracerProvider
    exporter: AwaitableSpanExporter
