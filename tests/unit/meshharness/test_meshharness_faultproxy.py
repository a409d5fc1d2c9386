"""The fault proxy on loopback: pass-through, latency, resets, black holes, slow reads, counting attempts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from meshcore.clients import make_channel
from meshcore.server import build_server
from meshharness.faultproxy import Fault, FaultProxy
from tests.unit.meshcore.support import SERVICE, RawService, runtime_for_tests, unary


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[FaultProxy]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    fault_proxy = await FaultProxy(f"127.0.0.1:{port}").start()
    try:
        yield fault_proxy
    finally:
        await fault_proxy.close()
        server.close()
        await server.wait_closed()


async def _exchange(proxy: FaultProxy, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(payload)
        await writer.drain()
        return await reader.readexactly(len(payload))
    finally:
        writer.close()


async def test_without_a_fault_bytes_pass_both_ways(proxy: FaultProxy) -> None:
    payload = bytes(range(256)) * 1000
    assert await _exchange(proxy, payload) == payload
    assert (proxy.stats.connections, proxy.stats.bytes_up, proxy.stats.bytes_down) == (1, 256_000, 256_000)
    assert proxy.stats.requests == 0  # not HTTP/2: nothing counted


async def test_latency_delays_every_byte_and_keeps_the_order(proxy: FaultProxy) -> None:
    proxy.latency(0.2)
    started = time.monotonic()
    payload = b"".join(b"%06d" % i for i in range(20_000))
    assert await _exchange(proxy, payload) == payload
    assert time.monotonic() - started >= 0.4  # 0.2 s up and 0.2 s down, at least (a lower bound only)
    assert proxy.mode is Fault.LATENCY


async def test_reset_aborts_open_connections_and_new_ones(proxy: FaultProxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"ping")
    assert await reader.readexactly(4) == b"ping"
    proxy.reset()
    with pytest.raises(ConnectionError):
        await reader.readexactly(1)  # the RST arrives as a reset, not as a clean end of stream
    writer.close()
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await _exchange(proxy, b"again")
    assert proxy.stats.resets == 2
    proxy.clear()
    assert await _exchange(proxy, b"back") == b"back"


async def test_a_black_hole_accepts_and_answers_nothing_until_it_clears(proxy: FaultProxy) -> None:
    proxy.blackhole()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)  # accepted
    writer.write(b"anyone?")
    await writer.drain()
    pending = asyncio.ensure_future(reader.readexactly(7))
    done, _ = await asyncio.wait([pending], timeout=0.3)  # silence observed, not waited for
    assert not done and proxy.stats.bytes_up == 0
    proxy.clear()  # the partition heals: what was sent meanwhile arrives, as TCP would deliver it
    assert await pending == b"anyone?"
    writer.close()


async def test_slow_reads_bound_the_rate(proxy: FaultProxy) -> None:
    proxy.slow_reads(16 * 1024)
    started = time.monotonic()
    payload = b"x" * 16 * 1024
    assert await _exchange(proxy, payload) == payload
    # 16 KiB at 16 KiB/s in 512-byte reads: each read is forwarded before its 31.25 ms pause, so the last one
    # leaves after 31 pauses (0.97 s), and the echo streams back meanwhile — a lower bound only (1.0 failed
    # at 0.9997 s once: the pauses overlap and asyncio may wake a timer up to its clock resolution early)
    assert time.monotonic() - started >= 0.9


async def test_grpc_call_attempts_are_counted_retries_included() -> None:
    service = RawService()
    server = build_server(runtime_for_tests(), [service.registration()], registry=CollectorRegistry())
    await server.start()
    proxy = await FaultProxy(f"127.0.0.1:{server.port}").start()
    service.flaky_failures = 2
    channel = make_channel(
        proxy.address,
        service_name=SERVICE,
        timeout_s=10,
        retry_attempts=3,
        idempotent_methods=("Flaky",),
        initial_backoff_s=0.01,
        registry=CollectorRegistry(),
    )
    try:
        async with channel:
            assert await unary(channel, "Echo")(b"one") == b"one"
            assert await unary(channel, "Flaky")(b"") == b"ok after 3"  # one call, three attempts
        assert proxy.stats.requests == 4
    finally:
        await proxy.close()
        await server.stop(grace=0)
