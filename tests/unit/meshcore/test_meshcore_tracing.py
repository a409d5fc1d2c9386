"""Tracing: spans on both sides of each hop share one trace (streams too); health checks make no spans; a
stream its client closes early ends its span quietly; a service's own span parents the calls made while it
steps through a stream, and a saved span context lets later work join a request's trace."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanContext, SpanKind, StatusCode

from meshcore.clients import make_channel
from meshcore.server import Registration, build_server
from meshcore.tracing import ServerSpans, setup_tracing, start_span, traced_steps
from tests.unit.meshcore.support import SERVICE, Running, identity, runtime_for_tests, server_stream, unary

FRONT = "meshcore.test.v1.Front"


async def test_trace_continues_across_two_hops(running: Running) -> None:
    """client → Front.Relay → Raw.Echo: four spans, one trace, each server span a child of its client span."""
    provider, exporter = running.tracer_provider, running.exporter
    backend = running.channel  # the fixture's channel to Raw, instrumented with the same provider

    async def relay(request: bytes, context: Any) -> bytes:
        return b"relayed " + await unary(backend, "Echo")(request, timeout=5)

    def add_front(server: grpc.aio.Server) -> None:
        handler = grpc.unary_unary_rpc_method_handler(relay, identity, identity)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(FRONT, {"Relay": handler})])

    front = build_server(
        runtime_for_tests(),
        [Registration(FRONT, add_front)],
        tracer_provider=provider,
        registry=running.registry,
    )
    async with front:
        channel = make_channel(
            f"127.0.0.1:{front.port}",
            service_name=FRONT,
            timeout_s=5,
            tracer_provider=provider,
            registry=running.registry,
        )
        async with channel:
            relay_call = channel.unary_unary(f"/{FRONT}/Relay", identity, identity)
            assert await relay_call(b"hi", timeout=5) == b"relayed hi"

    finished = await exporter.wait_for(4)
    by_key = {(s.name, s.kind): s for s in finished}
    assert len(by_key) == len(finished) == 4
    outer_client = by_key[(f"/{FRONT}/Relay", SpanKind.CLIENT)]
    outer_server = by_key[(f"/{FRONT}/Relay", SpanKind.SERVER)]
    inner_client = by_key[(f"/{SERVICE}/Echo", SpanKind.CLIENT)]
    inner_server = by_key[(f"/{SERVICE}/Echo", SpanKind.SERVER)]
    assert len({s.context.trace_id for s in finished}) == 1
    assert outer_server.parent is not None and outer_server.parent.span_id == outer_client.context.span_id
    assert inner_client.parent is not None and inner_client.parent.span_id == outer_server.context.span_id
    assert inner_server.parent is not None and inner_server.parent.span_id == inner_client.context.span_id


async def test_failed_call_marks_server_span_with_status_code(running: Running) -> None:
    with contextlib.suppress(grpc.aio.AioRpcError):
        await unary(running.channel, "Echo")(b"raise:NotFound")
    server_spans = [s for s in await running.exporter.wait_for(2) if s.kind is SpanKind.SERVER]
    assert [s.attributes.get("rpc.grpc.status_code") for s in server_spans if s.attributes] == [
        grpc.StatusCode.NOT_FOUND.value[0]
    ]


async def test_health_checks_are_not_traced(running: Running) -> None:
    reply = await health_pb2_grpc.HealthStub(running.channel).Check(health_pb2.HealthCheckRequest(service=""))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert await unary(running.channel, "Echo")(b"after") == b"after"
    # A health span would have ended before the health answer; only the Echo pair is there.
    names = {s.name for s in await running.exporter.wait_for(2)}
    assert names == {f"/{SERVICE}/Echo"}
    assert len(running.exporter.get_finished_spans()) == 2


def test_setup_tracing_without_endpoint_records_nowhere() -> None:
    provider = setup_tracing("svc", "", set_global=False)
    try:
        assert provider.resource.attributes["service.name"] == "svc"
        with provider.get_tracer("t").start_as_current_span("s") as span:
            assert span.get_span_context().is_valid  # ids exist for logs even with no exporter
            assert span.get_span_context().trace_flags.sampled  # as the SDK's default sampler decides
            assert not span.is_recording()
            with provider.get_tracer("u").start_as_current_span("child") as child:
                assert child.get_span_context() == span.get_span_context()  # passed through
    finally:
        provider.shutdown()


async def _relay_through_an_unrecorded_front(running: Running, *, traced_caller: bool) -> SpanContext:
    """client → Front.Relay (pass-through tracing, as without an endpoint) → Raw.Echo (recording).

    Returns the span context current in Front's handler; without ``traced_caller`` the client sends no
    traceparent.
    """
    quiet = setup_tracing("front", "", set_global=False)
    seen: list[SpanContext] = []
    backend = make_channel(
        f"127.0.0.1:{running.mesh.port}",
        service_name=SERVICE,
        timeout_s=5,
        tracer_provider=quiet,
        registry=running.registry,
    )

    async def relay(request: bytes, context: Any) -> bytes:
        current = trace.get_current_span()
        assert not current.is_recording()
        seen.append(current.get_span_context())
        return b"relayed " + await unary(backend, "Echo")(request, timeout=5)

    def add_front(server: grpc.aio.Server) -> None:
        handler = grpc.unary_unary_rpc_method_handler(relay, identity, identity)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(FRONT, {"Relay": handler})])

    registrations = [Registration(FRONT, add_front)]
    front = build_server(runtime_for_tests(), registrations, tracer_provider=quiet, registry=running.registry)
    async with front, backend:
        address = f"127.0.0.1:{front.port}"
        if not traced_caller:
            async with grpc.aio.insecure_channel(address) as plain:
                assert await plain.unary_unary(f"/{FRONT}/Relay", identity, identity)(b"hi") == b"relayed hi"
        else:
            channel = make_channel(
                address,
                service_name=FRONT,
                timeout_s=5,
                tracer_provider=running.tracer_provider,
                registry=running.registry,
            )
            async with channel:
                relay_call = channel.unary_unary(f"/{FRONT}/Relay", identity, identity)
                assert await relay_call(b"hi") == b"relayed hi"
    quiet.shutdown()
    (current,) = seen
    return current


async def test_without_an_endpoint_a_service_passes_its_callers_trace_on(running: Running) -> None:
    """The downstream server span is a child of the caller's span: the trace stays whole through a service
    that records nothing, and that service's log lines carry the caller's trace id."""
    current = await _relay_through_an_unrecorded_front(running, traced_caller=True)
    spans = await running.exporter.wait_for(2)
    by_key = {(s.name, s.kind): s for s in spans}
    assert set(by_key) == {(f"/{FRONT}/Relay", SpanKind.CLIENT), (f"/{SERVICE}/Echo", SpanKind.SERVER)}
    caller = by_key[(f"/{FRONT}/Relay", SpanKind.CLIENT)]
    downstream = by_key[(f"/{SERVICE}/Echo", SpanKind.SERVER)]
    assert (current.trace_id, current.span_id) == (caller.context.trace_id, caller.context.span_id)
    assert downstream.context.trace_id == caller.context.trace_id
    assert downstream.parent is not None and downstream.parent.span_id == caller.context.span_id


async def test_without_an_endpoint_a_call_with_no_caller_trace_starts_one(running: Running) -> None:
    """A fresh, sampled trace id for the logs, sent on to the next service, which continues it."""
    current = await _relay_through_an_unrecorded_front(running, traced_caller=False)
    assert current.is_valid and current.trace_flags.sampled
    (downstream,) = await running.exporter.wait_for(1)
    assert downstream.context.trace_id == current.trace_id
    assert downstream.parent is not None and downstream.parent.span_id == current.span_id


def test_setup_tracing_with_endpoint_adds_a_batch_exporter() -> None:
    provider = setup_tracing("svc", "http://127.0.0.1:4317", set_global=False)
    try:
        processors = provider._active_span_processor._span_processors
        assert [type(p).__name__ for p in processors] == ["BatchSpanProcessor"]
    finally:
        provider.shutdown()


async def test_a_stream_is_traced_as_a_child_of_its_client_span(running: Running) -> None:
    with contextlib.suppress(grpc.aio.AioRpcError):
        replies = [r async for r in server_stream(running.channel, "Repeat")(b"raise:NotFound")]
        assert replies == [b"raise:NotFound#0"]  # one message, then the handler raised
    spans = await running.exporter.wait_for(2)
    client = next(s for s in spans if s.kind is SpanKind.CLIENT)
    server = next(s for s in spans if s.kind is SpanKind.SERVER)
    assert server.parent is not None and server.parent.is_remote
    assert server.parent.span_id == client.context.span_id
    assert server.name == f"/{SERVICE}/Repeat"
    assert server.attributes is not None
    assert server.attributes["rpc.method"] == "Repeat" and server.attributes["rpc.service"] == SERVICE
    assert server.attributes["net.peer.name"] == "localhost"
    assert server.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]


async def test_a_stream_its_client_closes_early_ends_its_span_without_a_context_error(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    """gRPC cancels the handler while its generator is parked at a yield; the loop closes the generator
    later from another task. OTel's own stream wrapper then logged ERROR "Failed to detach context"."""
    caplog.set_level(logging.WARNING)
    call = server_stream(running.channel, "Endless")(b"abcd")
    async for reply in call:
        assert reply.startswith(b"abcd")
        break
    call.cancel()
    # The server span ends only once the abandoned generator has been closed: that is the event awaited
    # (the client's span may stay open: the client abandoned its side of the stream too).
    exporter = running.exporter
    while not (ended := [s for s in exporter.get_finished_spans() if s.kind is SpanKind.SERVER]):
        await exporter.wait_for(len(exporter.get_finished_spans()) + 1)
    assert [s.name for s in ended] == [f"/{SERVICE}/Endless"]
    assert [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_traced_steps_makes_calls_inside_each_step_children_of_its_span(running: Running) -> None:
    """A mailserver request over RLPx: no server span, so the service's own span must parent the calls."""
    provider, exporter = running.tracer_provider, running.exporter
    repeat = server_stream(running.channel, "Repeat")

    async def steps() -> AsyncIterator[bytes]:
        async for reply in repeat(b"abc"):  # the call starts inside the first step
            yield reply

    span = start_span("mailserver request", kind=SpanKind.SERVER, tracer_provider=provider)
    assert [r async for r in traced_steps(span, steps())] == [b"abc#0", b"abc#1", b"abc#2"]
    spans = await exporter.wait_for(3)
    by_kind = {(s.name, s.kind): s for s in spans}
    root = by_kind[("mailserver request", SpanKind.SERVER)]
    client = by_kind[(f"/{SERVICE}/Repeat", SpanKind.CLIENT)]
    server = by_kind[(f"/{SERVICE}/Repeat", SpanKind.SERVER)]
    assert root.parent is None and root.end_time is not None
    assert client.parent is not None and client.parent.span_id == root.context.span_id
    assert server.parent is not None and server.parent.span_id == client.context.span_id
    assert otel_context.get_current() == otel_context.Context()  # nothing left attached


async def test_traced_steps_records_a_failure_and_ends_the_span(spans: tuple[TracerProvider, Any]) -> None:
    provider, exporter = spans

    async def failing() -> AsyncIterator[int]:
        yield 1
        raise ValueError("broken archive")

    span = start_span("work", tracer_provider=provider)
    got: list[int] = []
    with pytest.raises(ValueError, match="broken archive"):
        async for item in traced_steps(span, failing()):
            got.append(item)
    assert got == [1]
    (ended,) = await exporter.wait_for(1)
    assert ended.status.status_code is StatusCode.ERROR
    assert [e.name for e in ended.events] == ["exception"]


def test_start_span_with_a_saved_parent_joins_its_trace(spans: tuple[TracerProvider, Any]) -> None:
    """Work done later in another task (a send attempt) continues the request's trace."""
    provider, exporter = spans
    with provider.get_tracer("t").start_as_current_span("Send") as send:
        saved = send.get_span_context()
    later = start_span("send attempt", parent=saved, tracer_provider=provider)
    later.end()
    fresh = start_span("unrelated", tracer_provider=provider)
    fresh.end()
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    attempt = by_name["send attempt"]
    assert attempt.context.trace_id == saved.trace_id
    assert attempt.parent is not None and attempt.parent.span_id == saved.span_id
    assert by_name["unrelated"].context.trace_id != saved.trace_id


def test_a_call_whose_client_left_starts_its_span_without_a_warning(
    spans: tuple[TracerProvider, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """gRPC reports an empty peer once the client is gone; the instrumentation logged a WARNING for each."""

    class Gone:
        def invocation_metadata(self) -> tuple[()]:
            return ()

        def peer(self) -> str:
            return ""

    caplog.set_level(logging.WARNING)
    span, _ = ServerSpans(spans[0]).start(f"/{SERVICE}/Echo", Gone())  # type: ignore[arg-type]
    assert span is not None
    span.end()
    (ended,) = spans[1].get_finished_spans()
    assert ended.attributes is not None
    assert ended.attributes["rpc.method"] == "Echo" and "net.peer.ip" not in ended.attributes
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
