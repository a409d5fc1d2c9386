"""Start hooks: run in order before SERVING; a service they hold NOT_SERVING stays so; a failing one stops."""

from __future__ import annotations

import asyncio

import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from meshcore.server import MeshServer, build_server
from tests.unit.meshcore.support import SERVICE, RawService, runtime_for_tests, unary

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def new_server(registry: CollectorRegistry) -> MeshServer:
    return build_server(runtime_for_tests(), [RawService().registration()], registry=registry)


async def statuses(mesh: MeshServer) -> dict[str, int]:
    """What a health client sees for the whole server and for the raw service."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return {
            name: int((await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)).status)
            for name in ("", SERVICE)
        }


async def test_start_hooks_run_in_order_before_health_says_serving(registry: CollectorRegistry) -> None:
    mesh = new_server(registry)
    events: list[str] = []

    async def first() -> None:
        events.append("first")
        assert await statuses(mesh) == {"": NOT_SERVING, SERVICE: NOT_SERVING}

    async def second() -> None:
        events.append("second")

    mesh.add_start_hook(first)
    mesh.add_start_hook(second)
    async with mesh:
        events.append("started")
        async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
            assert await unary(channel, "Echo")(b"x", timeout=10) == b"x"
        assert await statuses(mesh) == {"": SERVING, SERVICE: SERVING}
    assert events == ["first", "second", "started"]


async def test_a_service_a_start_hook_holds_not_serving_stays_so(registry: CollectorRegistry) -> None:
    # Without one source of truth, start() would mark every service SERVING after the hook said otherwise.
    mesh = new_server(registry)

    async def store_did_not_open() -> None:
        await mesh.set_serving(SERVICE, False)

    mesh.add_start_hook(store_did_not_open)
    async with mesh:
        assert await statuses(mesh) == {"": SERVING, SERVICE: NOT_SERVING}
        await mesh.set_serving(SERVICE, True)  # the retry loop, later
        assert await statuses(mesh) == {"": SERVING, SERVICE: SERVING}


@pytest.mark.parametrize("opens_during_start", [True, False])
async def test_a_retry_loop_started_by_a_hook_reports_the_last_state(
    registry: CollectorRegistry, opens_during_start: bool
) -> None:
    # The loop may report while start() is still starting the server or publishing health; either way
    # health ends up with what the loop said last.
    mesh = new_server(registry)
    opened = asyncio.Event()
    loops: list[asyncio.Task[None]] = []

    async def retry_loop() -> None:
        await opened.wait()
        await mesh.set_serving(SERVICE, True)

    async def open_store() -> None:
        await mesh.set_serving(SERVICE, False)
        loops.append(asyncio.get_running_loop().create_task(retry_loop()))

    mesh.add_start_hook(open_store)
    if opens_during_start:
        opened.set()  # the loop runs at start()'s first await after the hook
    async with mesh:
        if not opens_during_start:
            assert await statuses(mesh) == {"": SERVING, SERVICE: NOT_SERVING}
            opened.set()
        await loops[0]
        assert await statuses(mesh) == {"": SERVING, SERVICE: SERVING}


async def test_a_failing_start_hook_stops_the_server_and_propagates(registry: CollectorRegistry) -> None:
    mesh = new_server(registry)
    events: list[str] = []

    async def fine() -> None:
        events.append("fine")

    async def schema_mismatch() -> None:
        raise RuntimeError("the store's schema is newer than this code")

    async def never() -> None:
        events.append("never")

    async def stop_loops() -> None:
        events.append("shutdown hook")

    async def close_store() -> None:
        events.append("after-drain hook")

    for hook in (fine, schema_mismatch, never):
        mesh.add_start_hook(hook)
    mesh.add_shutdown_hook(stop_loops)
    mesh.add_shutdown_hook(close_store, after_drain=True)
    with pytest.raises(RuntimeError, match="schema is newer"):
        await mesh.start()
    assert events == ["fine", "shutdown hook", "after-drain hook"]
    again = build_server(runtime_for_tests(grpc_port=mesh.port), [], registry=CollectorRegistry())
    await again.stop(grace=0)  # the failed server let go of its port
