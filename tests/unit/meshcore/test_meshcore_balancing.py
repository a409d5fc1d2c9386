"""Channels over several replicas: targets, round-robin, failover of idempotent calls, keepalive."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry

from meshcore.balancing import (
    DEFAULT_KEEPALIVE,
    Keepalive,
    channel_target,
    current_keepalive,
    server_age_options,
    set_keepalive,
)
from meshcore.clients import make_channel
from meshcore.parsers import parse_grpc_target
from meshcore.server import MeshServer, build_server
from meshharness.faultproxy import FaultProxy
from tests.unit.meshcore.support import SERVICE, RawService, identity, method, runtime_for_tests, unary

FAST = Keepalive(time_s=0.2, timeout_s=0.3)  # what the tests' servers and clients agree on


@pytest.mark.parametrize(
    ("setting", "target"),
    [
        ("archive:50053", "archive:50053"),
        (" [::1]:50053 ", "[::1]:50053"),
        ("127.0.0.1:1, 127.0.0.2:2", "ipv4:127.0.0.1:1,127.0.0.2:2"),
        ("[::1]:1,[::2]:2", "ipv6:[::1]:1,[::2]:2"),
        ("dns:///archive-headless:50053", "dns:///archive-headless:50053"),
        ("ipv4:10.0.0.1:1,10.0.0.2:1", "ipv4:10.0.0.1:1,10.0.0.2:1"),
        ("unix:/run/archive.sock", "unix:/run/archive.sock"),
    ],
)
def test_an_address_setting_becomes_a_channel_target(setting: str, target: str) -> None:
    assert channel_target(setting) == target


@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ("archive-0:1,archive-1:1", "IP addresses"),  # gRPC's multi-address targets take no names
        ("127.0.0.1:1,[::1]:1", "all IPv4 or all IPv6"),
        ("127.0.0.1:1,127.0.0.1:1", "listed twice"),
        ("archive", "host:port"),
        ("archive:0", "port"),
        ("dns:///", "no address"),
        ("", "must be host:port"),
    ],
)
def test_addresses_gRPC_cannot_balance_are_refused(setting: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_grpc_target(setting)


@pytest.fixture
def fast_keepalive() -> Iterator[Keepalive]:
    before = current_keepalive()
    set_keepalive(FAST)
    yield FAST
    set_keepalive(before)
    assert current_keepalive() == DEFAULT_KEEPALIVE


@pytest.fixture
async def replicas(fast_keepalive: Keepalive) -> AsyncIterator[list[tuple[RawService, MeshServer]]]:
    runtime = runtime_for_tests(grpc_keepalive_s=FAST.time_s, grpc_keepalive_timeout_s=FAST.timeout_s)
    started = []
    for _ in range(2):
        service = RawService()
        server = build_server(runtime, [service.registration()], registry=CollectorRegistry())
        await server.start()
        started.append((service, server))
    try:
        yield started
    finally:
        for service, server in started:
            service.release.set()
            await server.stop(grace=0)


def _echo_channel(target: str) -> grpc.aio.Channel:
    return make_channel(
        target,
        service_name=SERVICE,
        timeout_s=30,
        retry_attempts=3,
        idempotent_methods=("Echo",),
        initial_backoff_s=0.01,
        max_backoff_s=0.05,
        registry=CollectorRegistry(),
    )


async def _until_both_serve(channel: grpc.aio.Channel, services: list[RawService]) -> None:
    """Call Echo until each replica has answered one (round-robin reaches the second once it connects)."""
    while not all(s.echoed for s in services):
        assert await unary(channel, "Echo")(b"hi") == b"hi"


async def test_calls_are_spread_over_the_replicas_and_fail_over_when_one_stops(
    replicas: list[tuple[RawService, MeshServer]],
) -> None:
    (first, first_server), (second, _) = replicas
    target = ",".join(f"127.0.0.1:{server.port}" for _, server in replicas)
    async with _echo_channel(target) as channel:
        await _until_both_serve(channel, [first, second])
        await first_server.stop(grace=0)  # the replica goes away (its connection closes)
        before = second.echoed
        for _ in range(20):
            assert await unary(channel, "Echo")(b"hi") == b"hi"  # each one answered: none lost
        assert second.echoed == before + 20


async def test_keepalive_drops_a_replica_that_went_silent_and_calls_go_to_the_other(
    replicas: list[tuple[RawService, MeshServer]],
) -> None:
    (first, first_server), (second, second_server) = replicas
    proxy = await FaultProxy(f"127.0.0.1:{first_server.port}").start()
    try:
        async with _echo_channel(f"{proxy.address},127.0.0.1:{second_server.port}") as channel:
            await _until_both_serve(channel, [first, second])
            proxy.blackhole()  # the first replica's connection stays open and answers nothing
            silenced = first.echoed
            for _ in range(10):
                # A call that lands on the silent replica fails UNAVAILABLE when the ping goes unanswered
                # (FAST: well inside the 30 s deadline) and its retry lands on the other one.
                assert await unary(channel, "Echo")(b"hi") == b"hi"
            assert first.echoed == silenced  # nothing reached it, yet every call ended, answered
    finally:
        proxy.clear()
        await proxy.close()


async def test_servers_accept_the_keepalive_pings_of_idle_channels(
    replicas: list[tuple[RawService, MeshServer]],
) -> None:
    (first, first_server), _ = replicas
    proxy = await FaultProxy(f"127.0.0.1:{first_server.port}").start()
    try:
        async with _echo_channel(proxy.address) as channel:
            await _until_both_serve(channel, [first])
            async with asyncio.timeout(60):
                while proxy.stats.pings < 10:  # idle: only keepalive pings cross the proxy now
                    await asyncio.sleep(0.05)  # polling a counter the proxy updates, not a synchronisation
            # A server that counted them as abuse would have sent GOAWAY too_many_pings after two and the
            # client would have stopped pinging (or reconnected): one connection, still usable.
            assert proxy.stats.connections == 1
            assert channel.get_state() is grpc.ChannelConnectivity.READY
            assert await unary(channel, "Echo")(b"hi") == b"hi"
    finally:
        await proxy.close()


async def test_an_old_connection_is_replaced_and_its_open_stream_lives_on() -> None:
    # A client balancing over a DNS name re-resolves only when a connection ends: the server's maximum
    # connection age is what makes old clients find replicas added since (gRFC A9).
    service = RawService()
    runtime = runtime_for_tests(grpc_max_connection_age_s=0.3)
    server = build_server(runtime, [service.registration()], registry=CollectorRegistry())
    await server.start()
    proxy = await FaultProxy(f"127.0.0.1:{server.port}").start()
    try:
        async with _echo_channel(proxy.address) as channel:
            chat = channel.stream_stream(method("Chat"), identity, identity)()
            await chat.write(b"before")
            assert await chat.read() == b"BEFORE"
            async with asyncio.timeout(60):
                while proxy.stats.connections < 2:  # GOAWAY after ~0.3 s: the channel reconnects
                    assert await unary(channel, "Echo")(b"hi") == b"hi"  # and no call fails meanwhile
            # The stream opened on the old connection was not cut by its GOAWAY (unbounded grace).
            await chat.write(b"after")
            assert await chat.read() == b"AFTER"
            await chat.done_writing()
            assert await chat.code() is grpc.StatusCode.OK
    finally:
        await proxy.close()
        await server.stop(grace=0)


def test_the_connection_age_defaults_to_five_minutes_and_can_be_turned_off() -> None:
    assert runtime_for_tests().grpc_max_connection_age_s == 300
    assert server_age_options(300) == [("grpc.max_connection_age_ms", 300_000)]
    assert server_age_options(0) == []
