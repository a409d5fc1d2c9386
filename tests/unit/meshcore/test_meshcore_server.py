"""The server bootstrap end to end: interceptors, metrics, error mapping, health, reflection."""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from meshcore.interceptors import INTERNAL_MESSAGE, MeshServerInterceptor
from meshcore.metrics import ServerMetrics
from meshcore.server import build_server
from tests.unit.meshcore.support import (
    SECRET,
    SERVICE,
    RawService,
    Running,
    bidi,
    client_stream,
    identity,
    runtime_for_tests,
    server_stream,
    unary,
)


def sample(running: Running, name: str, rpc: str, rpc_type: str, code: str | None = None) -> float:
    labels = {"grpc_type": rpc_type, "grpc_service": SERVICE, "grpc_method": rpc}
    if code is not None:
        labels["grpc_code"] = code
    return running.registry.get_sample_value(name, labels) or 0.0


async def test_unary_metrics_count_success_and_failure(running: Running) -> None:
    echo = unary(running.channel, "Echo")
    assert await echo(b"hello") == b"hello"
    with pytest.raises(grpc.aio.AioRpcError):
        await echo(b"raise:NotFound")

    def s(name: str, code: str | None = None) -> float:
        return sample(running, name, "Echo", "unary", code)

    assert s("grpc_server_started_total") == 2
    assert s("grpc_server_msg_received_total") == 2
    assert s("grpc_server_msg_sent_total") == 1  # the failed call sent no response
    assert s("grpc_server_handled_total", "OK") == 1
    assert s("grpc_server_handled_total", "NotFound") == 1
    assert s("grpc_server_handling_seconds_count") == 2
    assert s("grpc_server_handling_seconds_bucket") == 0  # no "le" label: not a real series
    bucket = running.registry.get_sample_value(
        "grpc_server_handling_seconds_bucket",
        {"grpc_type": "unary", "grpc_service": SERVICE, "grpc_method": "Echo", "le": "10.0"},
    )
    assert bucket == 2
    # The client side of the same calls.
    assert sample(running, "grpc_client_started_total", "Echo", "unary") == 2
    assert sample(running, "grpc_client_handled_total", "Echo", "unary", "OK") == 1
    assert sample(running, "grpc_client_handled_total", "Echo", "unary", "NotFound") == 1
    assert sample(running, "grpc_client_msg_sent_total", "Echo", "unary") == 2
    assert sample(running, "grpc_client_msg_received_total", "Echo", "unary") == 1
    assert sample(running, "grpc_client_handling_seconds_count", "Echo", "unary") == 2


async def test_server_stream_metrics_count_each_message(running: Running) -> None:
    repeat = server_stream(running.channel, "Repeat")
    assert [m async for m in repeat(b"x")] == [b"x#0", b"x#1", b"x#2"]
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        _ = [m async for m in repeat(b"raise:ResourceExhausted")]
    assert failed.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED

    assert sample(running, "grpc_server_started_total", "Repeat", "server_stream") == 2
    assert sample(running, "grpc_server_msg_received_total", "Repeat", "server_stream") == 2
    assert (
        sample(running, "grpc_server_msg_sent_total", "Repeat", "server_stream") == 4
    )  # 3 + 1 before failing
    assert sample(running, "grpc_server_handled_total", "Repeat", "server_stream", "OK") == 1
    assert sample(running, "grpc_server_handled_total", "Repeat", "server_stream", "ResourceExhausted") == 1
    assert sample(running, "grpc_client_msg_received_total", "Repeat", "server_stream") == 4
    assert sample(running, "grpc_client_handled_total", "Repeat", "server_stream", "OK") == 1
    assert sample(running, "grpc_client_handled_total", "Repeat", "server_stream", "ResourceExhausted") == 1


async def test_client_stream_metrics(running: Running) -> None:
    collect = client_stream(running.channel, "Collect")
    assert await collect(iter([b"a", b"b", b"c"])) == b"a|b|c"
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await collect(iter([b"a", b"raise:AlreadyExists"]))
    assert failed.value.code() is grpc.StatusCode.ALREADY_EXISTS

    assert sample(running, "grpc_server_started_total", "Collect", "client_stream") == 2
    assert sample(running, "grpc_server_msg_received_total", "Collect", "client_stream") == 5
    assert sample(running, "grpc_server_msg_sent_total", "Collect", "client_stream") == 1
    assert sample(running, "grpc_server_handled_total", "Collect", "client_stream", "OK") == 1
    assert sample(running, "grpc_server_handled_total", "Collect", "client_stream", "AlreadyExists") == 1
    assert sample(running, "grpc_client_msg_sent_total", "Collect", "client_stream") == 5
    assert sample(running, "grpc_client_msg_received_total", "Collect", "client_stream") == 1


async def test_bidi_stream_metrics(running: Running) -> None:
    chat = bidi(running.channel, "Chat")

    async def requests() -> AsyncIterator[bytes]:
        for r in (b"a", b"b"):
            yield r

    assert [m async for m in chat(requests())] == [b"A", b"B"]
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        _ = [m async for m in chat(iter([b"ok", b"raise:PermissionDenied"]))]
    assert failed.value.code() is grpc.StatusCode.PERMISSION_DENIED

    assert sample(running, "grpc_server_started_total", "Chat", "bidi_stream") == 2
    assert sample(running, "grpc_server_msg_received_total", "Chat", "bidi_stream") == 4
    assert sample(running, "grpc_server_msg_sent_total", "Chat", "bidi_stream") == 3
    assert sample(running, "grpc_server_handled_total", "Chat", "bidi_stream", "OK") == 1
    assert sample(running, "grpc_server_handled_total", "Chat", "bidi_stream", "PermissionDenied") == 1
    assert sample(running, "grpc_client_msg_sent_total", "Chat", "bidi_stream") == 4
    assert sample(running, "grpc_client_msg_received_total", "Chat", "bidi_stream") == 3
    assert sample(running, "grpc_client_handled_total", "Chat", "bidi_stream", "PermissionDenied") == 1


@pytest.mark.parametrize(
    ("category", "code"),
    [
        ("InvalidArgument", grpc.StatusCode.INVALID_ARGUMENT),
        ("NotFound", grpc.StatusCode.NOT_FOUND),
        ("AlreadyExists", grpc.StatusCode.ALREADY_EXISTS),
        ("FailedPrecondition", grpc.StatusCode.FAILED_PRECONDITION),
        ("ResourceExhausted", grpc.StatusCode.RESOURCE_EXHAUSTED),
        ("Unavailable", grpc.StatusCode.UNAVAILABLE),
        ("DeadlineExceeded", grpc.StatusCode.DEADLINE_EXCEEDED),
        ("PermissionDenied", grpc.StatusCode.PERMISSION_DENIED),
        ("Internal", grpc.StatusCode.INTERNAL),
    ],
)
async def test_mesh_errors_map_to_codes_with_their_message(
    running: Running, category: str, code: grpc.StatusCode
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await unary(running.channel, "Echo")(b"raise:" + category.encode())
    assert failed.value.code() is code
    assert failed.value.details() == f"{category} from handler"


async def test_unexpected_exception_is_internal_generic_and_logged(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="meshcore.interceptors")
    echo = unary(running.channel, "Echo")
    collect = client_stream(running.channel, "Collect")
    for start_call in (lambda: echo(b"raise:ValueError"), lambda: collect(iter([b"raise:ValueError"]))):
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await start_call()
        assert failed.value.code() is grpc.StatusCode.INTERNAL
        assert failed.value.details() == INTERNAL_MESSAGE
        assert SECRET not in (failed.value.debug_error_string() or "")
    records = [r for r in caplog.records if r.exc_info]
    assert [r.getMessage() for r in records] == [
        f"/{SERVICE}/Echo: unhandled ValueError",
        f"/{SERVICE}/Collect: unhandled ValueError",
    ]
    assert all(r.exc_info and isinstance(r.exc_info[1], ValueError) for r in records)
    assert sample(running, "grpc_server_handled_total", "Echo", "unary", "Internal") == 1


async def test_unknown_method_is_unimplemented_and_not_counted(running: Running) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await unary(running.channel, "Nope")(b"")
    assert failed.value.code() is grpc.StatusCode.UNIMPLEMENTED
    server_methods = {
        s.labels.get("grpc_method")
        for m in running.registry.collect()
        for s in m.samples
        if s.name.startswith("grpc_server_")
    }
    assert "Nope" not in server_methods  # a caller cannot mint server label values


async def test_a_method_is_wrapped_once_while_the_handler_below_stays_the_same() -> None:
    """The per-call cost: a known method's wrapper is reused; a different handler below (an auth refusal,
    say) is wrapped anew, never served by another handler's wrapper."""
    interceptor = MeshServerInterceptor(ServerMetrics.for_registry(CollectorRegistry()))
    details: Any = SimpleNamespace(method=f"/{SERVICE}/Echo", invocation_metadata=())

    async def echo(request: bytes, context: Any) -> bytes:
        return request

    below: list[grpc.RpcMethodHandler[bytes, bytes] | None] = [
        grpc.unary_unary_rpc_method_handler(echo, identity, identity)
    ]

    async def continuation(_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[bytes, bytes] | None:
        return below[0]

    first = await interceptor.intercept_service(continuation, details)
    assert first is not None and first is not below[0]
    assert await interceptor.intercept_service(continuation, details) is first
    below[0] = grpc.unary_unary_rpc_method_handler(echo, identity, identity)
    other = await interceptor.intercept_service(continuation, details)
    assert other is not None and other is not first and other.unary_unary is not first.unary_unary
    below[0] = None  # an unknown method passes through as unknown
    assert await interceptor.intercept_service(continuation, details) is None


async def test_health_serving_for_server_and_each_service(running: Running) -> None:
    stub = health_pb2_grpc.HealthStub(running.channel)
    for name in ("", SERVICE):
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=name))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
    assert failed.value.code() is grpc.StatusCode.NOT_FOUND

    await running.mesh.set_serving(SERVICE, False)
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE))
    assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_health_watch_streams_through_the_interceptors(running: Running) -> None:
    # The stock servicer's Watch is a coroutine that sends with context.write(), not an async generator:
    # the metrics and error interceptors must keep that shape (a regression made it INTERNAL).
    stub = health_pb2_grpc.HealthStub(running.channel)
    call = stub.Watch(health_pb2.HealthCheckRequest(service=""))
    first = await call.read()
    call.cancel()
    assert first.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_registered_services(running: Running) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(running.channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    replies = [r async for r in stub.ServerReflectionInfo(iter([request]))]
    names = {s.name for s in replies[0].list_services_response.service}
    assert names == {SERVICE, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}


async def test_metrics_endpoint_serves_the_registry(registry: CollectorRegistry) -> None:
    service = RawService()
    mesh = build_server(runtime_for_tests(metrics_port=0), [service.registration()], registry=registry)
    assert mesh.metrics_port is None  # not bound before start
    async with mesh:
        assert mesh.metrics_port
        async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
            assert await unary(channel, "Echo")(b"x") == b"x"
        body = await asyncio.to_thread(_fetch, f"http://127.0.0.1:{mesh.metrics_port}/metrics")
    samples = {
        (s.name, s.labels.get("grpc_method"), s.labels.get("grpc_code")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("grpc_server_handled_total", "Echo", "OK")] == 1
    assert not any(name.endswith("_created") for name, _, _ in samples)  # Go emits no _created series


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return bytes(response.read()).decode()


async def test_port_in_use_is_a_clear_error(running: Running) -> None:
    with pytest.raises(OSError, match="cannot listen"):
        build_server(runtime_for_tests(grpc_port=running.mesh.port), [])
