"""Transport security and the credentials a service's own channels carry (docs/security.md).

One :class:`~meshcore.config.SecurityConfig` serves both ends. A server built by
:func:`meshcore.server.build_server` listens with :func:`server_credentials` (mutual TLS: client
certificates required) and checks tokens with :class:`meshcore.auth.AuthInterceptor`. A channel opened by
:func:`meshcore.clients.make_channel` uses a :class:`ChannelSecurity`: TLS credentials with this service's
certificate, and the service token as ``authorization: Bearer`` metadata on every call.

The token goes through a client interceptor rather than gRPC call credentials because grpcio refuses call
credentials on a plaintext channel, and token auth without mutual TLS is a supported setting (behind a
service mesh's TLS, or on loopback).

:func:`install_channel_security` sets the process default, the way :func:`meshcore.tracing.setup_tracing`
sets the global tracer provider; :func:`meshcore.server.setup_observability` calls it, so every channel a
service opens afterwards carries its credentials without the service passing them around.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from meshcore.auth import load_tokens
from meshcore.config import SecurityConfig

__all__ = [
    "ChannelSecurity",
    "bearer_interceptors",
    "channel_security",
    "install_channel_security",
    "server_credentials",
]


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def server_credentials(cfg: SecurityConfig) -> grpc.ServerCredentials | None:
    """Mutual-TLS server credentials (client certificates required), or None for plaintext."""
    if not cfg.tls:
        return None
    return grpc.ssl_server_credentials(
        [(_read(cfg.tls_key), _read(cfg.tls_cert))],
        root_certificates=_read(cfg.tls_ca),
        require_client_auth=True,
    )


@dataclass(frozen=True)
class ChannelSecurity:
    """What a channel to another service carries: TLS credentials and a bearer token, each optional."""

    credentials: grpc.ChannelCredentials | None = field(default=None, repr=False)
    """TLS channel credentials with our client certificate; None = plaintext."""
    token: str | None = field(default=None, repr=False)
    """Sent as ``authorization: Bearer``; None = no token."""
    server_name: str = ""
    """Name expected in the server's certificate instead of the target's host; empty = the host."""

    @classmethod
    def from_config(cls, cfg: SecurityConfig) -> ChannelSecurity:
        """Our certificate and key, the CA, and the first service token, as ``cfg`` configures them."""
        credentials = None
        if cfg.tls:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(cfg.tls_ca),
                private_key=_read(cfg.tls_key),
                certificate_chain=_read(cfg.tls_cert),
            )
        tokens = load_tokens(cfg)
        return cls(credentials, tokens.sent if tokens is not None else None, cfg.tls_server_name)

    def with_token(self, token: str | None) -> ChannelSecurity:
        """The same transport with another token (an operator's admin token, say)."""
        return ChannelSecurity(self.credentials, token, self.server_name)

    def interceptors(self) -> list[grpc.aio.ClientInterceptor]:
        """The client interceptors adding the token (none without one)."""
        return bearer_interceptors(self.token) if self.token else []

    def channel(
        self,
        target: str,
        *,
        options: Sequence[tuple[str, Any]] = (),
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
    ) -> grpc.aio.Channel:
        """Open a ``grpc.aio`` channel to ``target`` (TLS when configured; the token interceptors last)."""
        chain = [*interceptors, *self.interceptors()]
        if self.credentials is None:
            return grpc.aio.insecure_channel(target, options=list(options), interceptors=chain)
        extra = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return grpc.aio.secure_channel(
            target, self.credentials, options=[*options, *extra], interceptors=chain
        )


_default = ChannelSecurity()


def install_channel_security(security: ChannelSecurity) -> None:
    """Make ``security`` what channels get when they are not given one (once, at start-up)."""
    global _default
    _default = security


def channel_security() -> ChannelSecurity:
    """The process default (plaintext, no token until :func:`install_channel_security`)."""
    return _default


def _with_token(details: grpc.aio.ClientCallDetails, header: str) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    metadata["authorization"] = header
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class _Bearer:
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def __repr__(self) -> str:  # never show the token, whatever prints an interceptor
        return f"{type(self).__name__}(<token>)"


class _UnaryUnaryBearer(_Bearer, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_token(details, self._header), request)


class _UnaryStreamBearer(_Bearer, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_with_token(details, self._header), request)


class _StreamUnaryBearer(_Bearer, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(_with_token(details, self._header), requests)


class _StreamStreamBearer(_Bearer, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return await continuation(_with_token(details, self._header), requests)


def bearer_interceptors(token: str) -> list[grpc.aio.ClientInterceptor]:
    """Add ``authorization: Bearer <token>`` to every call (one interceptor per call kind)."""
    return [
        _UnaryUnaryBearer(token),
        _UnaryStreamBearer(token),
        _StreamUnaryBearer(token),
        _StreamStreamBearer(token),
    ]
