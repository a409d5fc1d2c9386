"""The gRPC server's own limits (docs/security.md "Denial of service"): request size and RPCs at once."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry

from meshcore.server import build_server
from tests.unit.meshcore.support import RawService, runtime_for_tests, unary

LIMIT = 4096


async def test_a_message_over_the_limit_is_refused_and_a_smaller_one_served(
    registry: CollectorRegistry,
) -> None:
    mesh = build_server(
        runtime_for_tests(max_message_bytes=LIMIT), [RawService().registration()], registry=registry
    )
    await mesh.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
            assert await unary(channel, "Echo")(b"x" * (LIMIT - 64), timeout=10) == b"x" * (LIMIT - 64)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await unary(channel, "Echo")(b"x" * (LIMIT + 1), timeout=10)
            assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        await mesh.stop(grace=0)


async def test_rpcs_beyond_the_concurrency_limit_are_refused_until_one_ends(
    registry: CollectorRegistry,
) -> None:
    service = RawService()
    mesh = build_server(runtime_for_tests(max_concurrent_rpcs=1), [service.registration()], registry=registry)
    await mesh.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
            held = asyncio.ensure_future(unary(channel, "Block")(b"", timeout=30))
            await asyncio.wait_for(service.block_started.wait(), 30)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await unary(channel, "Echo")(b"second", timeout=10)
            assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            service.release.set()
            assert await held == b"released"
            assert await unary(channel, "Echo")(b"third", timeout=10) == b"third"
    finally:
        service.release.set()
        await mesh.stop(grace=0)
