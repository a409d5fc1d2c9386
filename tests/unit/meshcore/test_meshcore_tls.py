"""Mutual TLS between services; the security settings: loopback by default, all-or-none TLS, secret tokens."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry

from meshcore.config import (
    ConfigError,
    RuntimeConfig,
    SecurityConfig,
    describe,
    load_config,
    runtime_settings,
)
from meshcore.security import ChannelSecurity
from meshcore.server import MeshServer, build_server
from tests.security_support import MESH_NAME, Pki, TlsPaths
from tests.unit.meshcore.support import RawService, runtime_for_tests, unary

TOKEN = "a-long-enough-secret-token"


def security(env: dict[str, str]) -> SecurityConfig:
    return load_config(SecurityConfig, env)


@dataclasses.dataclass
class TlsServer:
    mesh: MeshServer
    pki: Pki
    server: TlsPaths

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.mesh.port}"


@pytest.fixture
async def tls_server(tmp_path: Path, registry: CollectorRegistry) -> AsyncIterator[TlsServer]:
    pki = Pki(tmp_path)
    server = pki.issue("archive")
    runtime = dataclasses.replace(runtime_for_tests(), security=security(server.env()))
    mesh = build_server(runtime, [RawService().registration()], registry=registry)
    await mesh.start()
    try:
        yield TlsServer(mesh, pki, server)
    finally:
        await mesh.stop(grace=0)


async def echo(channel: grpc.aio.Channel) -> bytes:
    async with channel:
        return await unary(channel, "Echo")(b"hi", timeout=10)


async def test_a_client_with_a_certificate_of_the_ca_gets_through(tls_server: TlsServer) -> None:
    client = tls_server.pki.issue("ingest")
    assert await echo(ChannelSecurity.from_config(security(client.env())).channel(tls_server.target)) == b"hi"
    # One certificate for every service: clients check the shared name, not the target's host.
    named = ChannelSecurity.from_config(security(client.env(server_name=MESH_NAME)))
    assert await echo(named.channel(tls_server.target)) == b"hi"


async def expect_refused(channel: grpc.aio.Channel) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await echo(channel)
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE  # the handshake fails: no call is made


async def test_plaintext_and_certificate_less_clients_are_refused(tls_server: TlsServer) -> None:
    await expect_refused(grpc.aio.insecure_channel(tls_server.target))
    no_cert = grpc.ssl_channel_credentials(root_certificates=tls_server.server.ca.read_bytes())
    await expect_refused(grpc.aio.secure_channel(tls_server.target, no_cert))


async def test_a_certificate_of_another_ca_is_refused_both_ways(
    tls_server: TlsServer, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    stranger = Pki(tmp_path / "other", ca_name="other CA").issue("stranger")
    await expect_refused(ChannelSecurity.from_config(security(stranger.env())).channel(tls_server.target))
    # A client trusting only the other CA refuses our server too.
    ours = tls_server.pki.issue("ingest")
    mixed = TlsPaths(ours.cert, ours.key, stranger.ca)
    await expect_refused(ChannelSecurity.from_config(security(mixed.env())).channel(tls_server.target))


def test_listeners_bind_loopback_by_default() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Cfg:
        runtime: RuntimeConfig = runtime_settings("X", service_name="x", grpc_port=1, metrics_port=2)

    cfg = load_config(Cfg, {})
    assert cfg.runtime.grpc_host == "127.0.0.1"
    assert cfg.runtime.security.auth == "off" and not cfg.runtime.security.tls
    assert load_config(Cfg, {"X_GRPC_HOST": "0.0.0.0"}).runtime.grpc_host == "0.0.0.0"


def test_tls_files_come_together_and_must_exist(tmp_path: Path) -> None:
    paths = Pki(tmp_path).issue("svc")
    assert security(paths.env()).tls
    with pytest.raises(ConfigError, match="together"):
        security({"MAILMESH_TLS_CERT": str(paths.cert)})
    with pytest.raises(ConfigError, match=r"MAILMESH_TLS_KEY=.*not an existing file"):
        security({**paths.env(), "MAILMESH_TLS_KEY": str(tmp_path / "missing.key")})


def test_token_auth_needs_service_and_admin_tokens() -> None:
    with pytest.raises(ConfigError, match="MAILMESH_AUTH_SERVICE_TOKENS"):
        security({"MAILMESH_AUTH": "token", "MAILMESH_AUTH_ADMIN_TOKENS": TOKEN})
    with pytest.raises(ConfigError, match="MAILMESH_AUTH_ADMIN_TOKENS"):
        security({"MAILMESH_AUTH": "token", "MAILMESH_AUTH_SERVICE_TOKENS": TOKEN})
    ok = security(
        {"MAILMESH_AUTH": "token", "MAILMESH_AUTH_SERVICE_TOKENS": TOKEN, "MAILMESH_AUTH_ADMIN_TOKENS": TOKEN}
    )
    assert ok.service_tokens == (TOKEN,)


@pytest.mark.parametrize(
    "bad", ["short-token", "has a space in it ok", "comma,separated-but-short", "ünicode-token-long-enough"]
)
def test_bad_tokens_are_refused_without_being_shown(bad: str) -> None:
    with pytest.raises(ConfigError) as raised:
        security({"MAILMESH_AUTH_CLIENT_TOKENS": bad})
    assert "MAILMESH_AUTH_CLIENT_TOKENS=<secret>" in str(raised.value)
    for part in bad.split(","):
        assert part not in str(raised.value)


def test_describe_hides_token_values() -> None:
    rows = {r.env: r for r in describe(SecurityConfig)}
    assert rows["MAILMESH_AUTH"].default == "off"
    assert rows["MAILMESH_AUTH_ADMIN_TOKENS"].default == ""  # nothing to hide by default
    assert set(rows) >= {
        "MAILMESH_TLS_CERT",
        "MAILMESH_TLS_KEY",
        "MAILMESH_TLS_CA",
        "MAILMESH_TLS_SERVER_NAME",
    }


async def test_the_channel_presents_the_service_token_and_hides_it(tmp_path: Path) -> None:
    cfg = security(
        {
            "MAILMESH_AUTH": "token",
            "MAILMESH_AUTH_SERVICE_TOKENS": TOKEN,
            "MAILMESH_AUTH_ADMIN_TOKENS_FILE": str(_file(tmp_path)),
        }
    )
    channel_security = ChannelSecurity.from_config(cfg)
    assert channel_security.token == TOKEN
    assert TOKEN not in repr(channel_security) and TOKEN not in repr(channel_security.interceptors())


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "admin.tokens"
    path.write_text("admin-token-from-a-file-0\n")
    return path


async def test_the_probe_port_answers_health_in_plaintext_and_nothing_else(
    tmp_path: Path, registry: CollectorRegistry
) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    paths = Pki(tmp_path).issue("archive")
    runtime = dataclasses.replace(runtime_for_tests(), security=security(paths.env()), probe_port=0)
    mesh = build_server(runtime, [RawService().registration()], registry=registry)
    await mesh.start()
    try:
        assert mesh.probe_port is not None and mesh.probe_port != mesh.port
        async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.probe_port}") as probe:
            reply = await health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await unary(probe, "Echo")(b"hi", timeout=10)
            assert raised.value.code() is grpc.StatusCode.UNAUTHENTICATED
        secure = ChannelSecurity.from_config(security(paths.env())).channel(f"127.0.0.1:{mesh.port}")
        assert await echo(secure) == b"hi"
    finally:
        await mesh.stop(grace=0)
    plain = build_server(
        dataclasses.replace(runtime_for_tests(), probe_port=0), [], registry=CollectorRegistry()
    )
    assert plain.probe_port is None  # without TLS the gRPC port itself is plaintext: no second port
    await plain.grpc_server.stop(None)
