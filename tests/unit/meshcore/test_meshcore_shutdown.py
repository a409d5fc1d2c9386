"""Graceful shutdown: health flips first, in-flight calls finish, hooks run in order, SIGTERM exits 0."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from meshcore.server import Registration, build_server
from meshharness import ServiceProcess, ServiceSpec, spawn
from tests.unit.meshcore.support import SERVICE, RawService, identity, runtime_for_tests, unary

APP = "tests.unit.meshcore.sigterm_app"
PROCESS_TIMEOUT = 30.0  # generous: a cold interpreter imports grpc and OpenTelemetry first


async def test_health_goes_not_serving_before_hooks_and_drain(registry: CollectorRegistry) -> None:
    mesh = build_server(runtime_for_tests(), [RawService().registration()], registry=registry)
    await mesh.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}")
    stub = health_pb2_grpc.HealthStub(channel)
    events: list[str] = []

    async def status(service: str) -> int:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        return int(reply.status)

    async def before_drain() -> None:
        # The server still answers here, and already reports NOT_SERVING for everything.
        events.append(f"hook sees {await status('')} {await status(SERVICE)}")

    async def after_drain() -> None:
        events.append("after drain")

    mesh.add_shutdown_hook(before_drain)
    mesh.add_shutdown_hook(after_drain, after_drain=True)
    assert await status("") == health_pb2.HealthCheckResponse.SERVING
    assert await status(SERVICE) == health_pb2.HealthCheckResponse.SERVING
    await mesh.stop(grace=1)
    await channel.close()
    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
    assert events == [f"hook sees {not_serving} {not_serving}", "after drain"]


def _hold_service(started: asyncio.Event, resume: asyncio.Event, port: list[int]) -> Registration:
    """``/t.Hold/Hold`` blocks until ``resume``, then proves a new call is refused; ``Ping`` answers."""

    async def hold(request: bytes, context: object) -> bytes:
        started.set()
        await resume.wait()
        # Shutdown is under way and this call is still running: a brand-new call must be refused.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port[0]}") as probe:
            with pytest.raises(grpc.aio.AioRpcError):
                await probe.unary_unary("/t.Hold/Ping", identity, identity)(b"", timeout=2)
        return b"finished during drain"

    async def ping(request: bytes, context: object) -> bytes:
        return b"pong"

    def add(server: grpc.aio.Server) -> None:
        handlers = {
            "Hold": grpc.unary_unary_rpc_method_handler(hold, identity, identity),
            "Ping": grpc.unary_unary_rpc_method_handler(ping, identity, identity),
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.Hold", handlers)])

    return Registration("t.Hold", add)


async def test_in_flight_call_finishes_within_grace(registry: CollectorRegistry) -> None:
    started, resume, port = asyncio.Event(), asyncio.Event(), [0]
    mesh = build_server(runtime_for_tests(), [_hold_service(started, resume, port)], registry=registry)
    port[0] = mesh.port
    await mesh.start()
    real_stop = mesh.grpc_server.stop

    async def stop_then_resume(grace: float | None) -> None:
        # Setting the event only makes the handler runnable; it resumes once real_stop has
        # begun the shutdown and yielded, so the call is in flight when the drain starts.
        resume.set()
        await real_stop(grace)

    mesh.grpc_server.stop = stop_then_resume  # type: ignore[method-assign]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
        in_flight = asyncio.ensure_future(
            channel.unary_unary("/t.Hold/Hold", identity, identity)(b"", timeout=10)
        )
        await started.wait()
        await mesh.stop(grace=5)
        assert await in_flight == b"finished during drain"


async def test_call_outliving_the_grace_is_cancelled(registry: CollectorRegistry) -> None:
    service = RawService()
    mesh = build_server(runtime_for_tests(), [service.registration()], registry=registry)
    await mesh.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
        in_flight = asyncio.ensure_future(unary(channel, "Block")(b"", timeout=10))
        await service.block_started.wait()
        loop = asyncio.get_running_loop()
        begun = loop.time()
        await mesh.stop(grace=0.2)
        assert loop.time() - begun < 3
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await in_flight
        assert failed.value.code() in {grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE}


async def test_serve_forever_returns_after_request_shutdown(registry: CollectorRegistry) -> None:
    mesh = build_server(runtime_for_tests(), [RawService().registration()], registry=registry)
    ran: list[str] = []

    async def hook() -> None:
        ran.append("hook")

    mesh.add_shutdown_hook(hook)
    serving = asyncio.ensure_future(mesh.serve_forever(settle=False))  # this process is pytest's
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
        # wait_for_ready: the call waits for serve_forever to have started the server.
        assert await unary(channel, "Echo")(b"up", timeout=10, wait_for_ready=True) == b"up"
    mesh.request_shutdown()
    await asyncio.wait_for(serving, timeout=10)
    assert ran == ["hook"]
    await mesh.stop()  # a second stop is a no-op


async def test_failing_and_slow_hooks_do_not_block_shutdown(
    registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    mesh = build_server(runtime_for_tests(shutdown_grace_s=0.1), [], registry=registry)
    await mesh.start()
    ran: list[str] = []

    async def broken() -> None:
        raise RuntimeError("flush failed")

    async def stuck() -> None:
        await asyncio.Event().wait()

    async def last() -> None:
        ran.append("last")

    for hook in (broken, stuck, last):
        mesh.add_shutdown_hook(hook, after_drain=True)
    await mesh.stop()
    assert ran == ["last"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("broken" in m and "failed" in m for m in messages)
    assert any("stuck" in m and "did not finish" in m for m in messages)


def _spawn(**env: str) -> ServiceProcess:
    """The app as a process (the harness; stdout and stderr merged), on a port it picks and announces."""
    settings = {"SIGAPP_GRPC_HOST": "127.0.0.1", "SIGAPP_GRPC_PORT": "0", "SIGAPP_METRICS_PORT": "-1", **env}
    return spawn(ServiceSpec(name="sigapp", module=APP, env=settings), strip_env_prefixes=("SIGAPP_",))


async def _read_until(proc: ServiceProcess, predicate: Callable[[str], bool]) -> str:
    line = await asyncio.to_thread(proc.logs.wait_for, lambda line: predicate(line.text), PROCESS_TIMEOUT)
    return line.text


async def _finish(proc: ServiceProcess) -> list[str]:
    """Wait for the exit (SIGKILL if it does not come in time); every line it wrote."""
    try:
        await proc.wait_exit_async(PROCESS_TIMEOUT)
    finally:
        await proc.stop_async(0)
    return [line.text for line in proc.logs.lines]


async def test_sigterm_drains_and_exits_zero() -> None:
    proc = _spawn(MAILMESH_LOG_FORMAT="json", SIGAPP_REPORT_HEAP="true")
    try:
        port = int((await _read_until(proc, lambda line: line.startswith("READY "))).split()[1])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert await unary(channel, "Echo")(b"alive", timeout=5) == b"alive"
        proc.send_signal(signal.SIGTERM)
    finally:
        lines = await _finish(proc)
    assert proc.returncode == 0, lines
    assert "HOOK RAN" in lines
    # serve_forever froze the start-up heap (meshcore.heap); young collections as often as CPython's default.
    [heap] = [line.split() for line in lines if line.startswith("HEAP ")]
    assert int(heap[1]) > 10_000 and int(heap[2]) == 700
    logs = [json.loads(line) for line in lines if line.startswith("{")]
    assert {"SIGTERM received", "stopped"} <= {entry["msg"] for entry in logs}
    assert all(entry["service"] == "sigapp" for entry in logs)


async def test_second_signal_cuts_the_drain_short() -> None:
    # A grace far beyond PROCESS_TIMEOUT: only the second signal can make the app exit in time.
    proc = _spawn(MAILMESH_LOG_FORMAT="json", SIGAPP_SHUTDOWN_GRACE_SECONDS="600")
    try:
        port = int((await _read_until(proc, lambda line: line.startswith("READY "))).split()[1])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            blocked = asyncio.ensure_future(unary(channel, "Block")(b"", timeout=PROCESS_TIMEOUT))
            await _read_until(proc, lambda line: line == "BLOCKED")
            proc.send_signal(signal.SIGINT)
            await _read_until(proc, lambda line: "shutting down" in line)
            proc.send_signal(signal.SIGINT)
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await blocked
        assert failed.value.code() in {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
    finally:
        lines = await _finish(proc)
    assert proc.returncode == 0 and not proc.killed, lines
    assert "HOOK RAN" in lines


async def test_bad_config_exits_2_listing_every_problem() -> None:
    proc = _spawn(SIGAPP_GRPC_PORT="http", SIGAPP_METRICS_PORT="-7", SIGAPP_CRASH="maybe")
    text = "\n".join(await _finish(proc))
    assert proc.returncode == 2
    assert "3 configuration problem(s)" in text
    for name in ("SIGAPP_GRPC_PORT", "SIGAPP_METRICS_PORT", "SIGAPP_CRASH"):
        assert name in text
    assert "Traceback" not in text


async def test_crash_exits_1_with_traceback() -> None:
    proc = _spawn(SIGAPP_CRASH="true", MAILMESH_LOG_FORMAT="text")
    text = "\n".join(await _finish(proc))
    assert proc.returncode == 1
    assert "RuntimeError: crash requested" in text
