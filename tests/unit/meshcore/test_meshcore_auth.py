"""Bearer-token auth: every RPC is classified, tokens compare right, real calls are refused or let in."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from meshcore import errors
from meshcore.auth import (
    ADMIN_METHODS,
    CLIENT_SERVICES,
    SERVICE_SERVICES,
    AuthInterceptor,
    Role,
    Tokens,
    bearer_token,
    load_tokens,
    read_token_file,
    required_role,
)
from meshcore.clients import make_channel, translate_rpc_error
from meshcore.config import SecurityConfig, load_config
from meshcore.security import ChannelSecurity, bearer_interceptors, channel_security, install_channel_security
from meshcore.server import build_server
from tests.unit.meshcore.support import (
    SERVICE,
    RawService,
    bidi,
    client_stream,
    runtime_for_tests,
    server_stream,
    unary,
)

CLIENT, SERVICE_TOKEN, ADMIN = "client-token-0123456789", "service-token-0123456789", "admin-token-0123456789"
TOKENS = Tokens.of({Role.CLIENT: [CLIENT], Role.SERVICE: [SERVICE_TOKEN], Role.ADMIN: [ADMIN]})
PROTOS = ("archive", "edgepeer", "health", "history", "ingest", "send", "subscription")


def every_rpc() -> list[str]:
    methods = []
    for domain in PROTOS:
        module = importlib.import_module(f"mailmesh.{domain}.v1.{domain}_pb2")
        for service in module.DESCRIPTOR.services_by_name.values():
            methods += [f"/{service.full_name}/{m.name}" for m in service.methods]
    return methods


def test_every_rpc_of_every_proto_is_classified_and_the_admin_ones_are_these() -> None:
    rpcs = every_rpc()
    assert len(rpcs) == 40  # history-query WatchServed (the subscription service follows it) is the 40th
    for rpc in rpcs:
        service = rpc.split("/")[1]
        assert service in CLIENT_SERVICES | SERVICE_SERVICES, f"{service} is not classified"
    assert (
        {rpc for rpc in rpcs if required_role(rpc) is Role.ADMIN}
        == set(ADMIN_METHODS)
        == {
            "/mailmesh.archive.v1.ArchiveService/DeleteBuckets",
            "/mailmesh.archive.v1.ArchiveService/Expire",
            "/mailmesh.archive.v1.ArchiveService/PutShardPlan",
            "/mailmesh.edgepeer.v1.EdgePeerService/AddPeer",
            "/mailmesh.edgepeer.v1.EdgePeerService/RemovePeer",
            "/mailmesh.edgepeer.v1.EdgePeerService/SetTrusted",
        }
    )


@pytest.mark.parametrize(
    ("method", "role"),
    [
        ("/grpc.health.v1.Health/Watch", Role.OPEN),
        ("/mailmesh.send.v1.SendService/Send", Role.CLIENT),
        ("/mailmesh.health.v1.HealthService/GetHealth", Role.CLIENT),
        ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", Role.CLIENT),
        ("/mailmesh.archive.v1.ArchiveService/QueryEnvelopes", Role.SERVICE),
        ("/mailmesh.history.v1.HistoryQueryService/Query", Role.SERVICE),
        ("/mailmesh.history.v1.HistoryQueryService/WatchServed", Role.SERVICE),
        ("/mailmesh.archive.v1.ArchiveService/Expire", Role.ADMIN),
        ("/unknown.v1.Thing/Do", Role.ADMIN),  # closed until classified
    ],
)
def test_required_role(method: str, role: Role) -> None:
    assert required_role(method) is role


def test_tokens_map_to_their_role_and_nothing_else() -> None:
    assert TOKENS.role_of(CLIENT) is Role.CLIENT
    assert TOKENS.role_of(SERVICE_TOKEN) is Role.SERVICE
    assert TOKENS.role_of(ADMIN) is Role.ADMIN
    for wrong in (None, "", ADMIN[:-1], ADMIN + "x", ADMIN.upper()):
        assert TOKENS.role_of(wrong) is None
    both = Tokens.of({Role.ADMIN: [CLIENT], Role.CLIENT: [CLIENT]})
    assert both.role_of(CLIENT) is Role.ADMIN
    assert CLIENT not in repr(TOKENS) and ADMIN not in repr(Tokens.of({}, sent=ADMIN))


@pytest.mark.parametrize(
    ("metadata", "token"),
    [
        ((("authorization", f"Bearer {ADMIN}"),), ADMIN),
        ((("Authorization", f"bearer   {ADMIN} "),), ADMIN),
        ((("authorization", f"Basic {ADMIN}"),), None),
        ((("authorization", "Bearer "),), None),
        ((("x-token", ADMIN),), None),
        (None, None),
    ],
)
def test_bearer_token(metadata: Any, token: str | None) -> None:
    assert bearer_token(metadata) == token


def test_load_tokens_reads_inline_and_file_tokens(tmp_path: Path) -> None:
    admin_file = tmp_path / "admin"
    admin_file.write_text(f"# rotated 2026-01\n\n{ADMIN}\n  second-admin-token-xyz  \n")
    assert read_token_file(str(admin_file)) == [ADMIN, "second-admin-token-xyz"]
    cfg = load_config(
        SecurityConfig,
        {
            "MAILMESH_AUTH": "token",
            "MAILMESH_AUTH_SERVICE_TOKENS": f"{SERVICE_TOKEN},older-service-token-1",
            "MAILMESH_AUTH_ADMIN_TOKENS_FILE": str(admin_file),
        },
    )
    tokens = load_tokens(cfg)
    assert tokens is not None and tokens.sent == SERVICE_TOKEN
    assert tokens.role_of("older-service-token-1") is Role.SERVICE
    assert tokens.role_of("second-admin-token-xyz") is Role.ADMIN
    assert tokens.role_of(CLIENT) is None  # no client tokens configured
    assert load_tokens(load_config(SecurityConfig, {})) is None


# ---------------------------------------------------------------------------------- over real gRPC

RAW_ROLES = {"Echo": Role.CLIENT, "Repeat": Role.SERVICE, "Collect": Role.ADMIN, "Chat": Role.SERVICE}


def raw_policy(method: str) -> Role:
    name = method.rpartition("/")[2]
    return RAW_ROLES.get(name, required_role(method))


async def call(channel: grpc.aio.Channel, name: str) -> bytes:
    """One call of raw method ``name`` in its shape; returns what came back."""
    if name == "Echo":
        return await unary(channel, name)(b"hi", timeout=10)
    if name == "Repeat":
        return b"".join([r async for r in server_stream(channel, name)(b"hi", timeout=10)])

    async def requests() -> AsyncIterator[bytes]:
        yield b"hi"

    if name == "Collect":
        return await client_stream(channel, name)(requests(), timeout=10)
    return b"".join([r async for r in bidi(channel, name)(requests(), timeout=10)])


@pytest.fixture
async def guarded(registry: CollectorRegistry) -> AsyncIterator[Callable[[str | None], grpc.aio.Channel]]:
    mesh = build_server(
        runtime_for_tests(),
        [RawService().registration()],
        registry=registry,
        interceptors=[AuthInterceptor(TOKENS, raw_policy)],
    )
    await mesh.start()
    channels: list[grpc.aio.Channel] = []

    def channel(token: str | None) -> grpc.aio.Channel:
        interceptors = bearer_interceptors(token) if token else []
        channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}", interceptors=interceptors))
        return channels[-1]

    try:
        yield channel
    finally:
        for ch in channels:
            await ch.close()
        await mesh.stop(grace=0)


@pytest.mark.parametrize("name", sorted(RAW_ROLES))
async def test_each_shape_needs_its_role(
    guarded: Callable[[str | None], grpc.aio.Channel], registry: CollectorRegistry, name: str
) -> None:
    needed = RAW_ROLES[name]
    for token, role in (
        (None, None),
        ("not-a-token-at-all", None),
        (CLIENT, Role.CLIENT),
        (SERVICE_TOKEN, Role.SERVICE),
        (ADMIN, Role.ADMIN),
    ):
        channel = guarded(token)
        if role is not None and role >= needed:
            assert await call(channel, name)
            continue
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call(channel, name)
        expected = grpc.StatusCode.UNAUTHENTICATED if role is None else grpc.StatusCode.PERMISSION_DENIED
        assert raised.value.code() is expected, (name, role)
        assert (token or "-") not in (raised.value.details() or "")
        translated = translate_rpc_error(raised.value)
        assert isinstance(translated, errors.PermissionDenied)
        assert isinstance(translated, errors.Unauthenticated) is (role is None)
    handled = registry.get_sample_value(
        "grpc_server_handled_total",
        {
            "grpc_service": SERVICE,
            "grpc_method": name,
            "grpc_code": "Unauthenticated",
            "grpc_type": _type(name),
        },
    )
    assert handled == 2  # refusals are counted like any failed call


def _type(name: str) -> str:
    return {"Echo": "unary", "Repeat": "server_stream", "Collect": "client_stream", "Chat": "bidi_stream"}[
        name
    ]


async def test_health_needs_no_token(guarded: Callable[[str | None], grpc.aio.Channel]) -> None:
    stub = health_pb2_grpc.HealthStub(guarded(None))
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_build_server_turns_auth_on_from_the_config(registry: CollectorRegistry) -> None:
    security = load_config(
        SecurityConfig,
        {
            "MAILMESH_AUTH": "token",
            "MAILMESH_AUTH_SERVICE_TOKENS": SERVICE_TOKEN,
            "MAILMESH_AUTH_ADMIN_TOKENS": ADMIN,
        },
    )
    runtime = dataclasses.replace(runtime_for_tests(), security=security)
    mesh = build_server(runtime, [RawService().registration()], registry=registry)
    await mesh.start()
    target = f"127.0.0.1:{mesh.port}"
    previous = channel_security()
    try:
        plain = make_channel(target, service_name=SERVICE, timeout_s=10, registry=registry)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await unary(plain, "Echo")(b"hi")
        assert raised.value.code() is grpc.StatusCode.UNAUTHENTICATED
        # What setup_observability installs: the service token. The raw service is unclassified: admin only.
        install_channel_security(ChannelSecurity.from_config(security))
        as_service = make_channel(target, service_name=SERVICE, timeout_s=10, registry=registry)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await unary(as_service, "Echo")(b"hi")
        assert raised.value.code() is grpc.StatusCode.PERMISSION_DENIED
        as_admin = make_channel(
            target,
            service_name=SERVICE,
            timeout_s=10,
            registry=registry,
            security=channel_security().with_token(ADMIN),
        )
        assert await unary(as_admin, "Echo")(b"hi") == b"hi"
        for ch in (plain, as_service, as_admin):
            await ch.close()
    finally:
        install_channel_security(previous)
        await mesh.stop(grace=0)
