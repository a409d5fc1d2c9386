"""Bearer-token authorisation of gRPC calls: which role each RPC needs, the tokens, the server interceptor.

Three roles, each including the one below it (docs/security.md "Authorisation"):

- **client**: the Messaging API (send, subscription, the node-health service) and server reflection;
- **service**: the mesh's internal APIs (ingest, archive reads and writes, history, the edge peer's
  publish and streams) — what the services call on each other;
- **admin**: the RPCs that delete data, change sharding or change the edge peer's peer set.

``grpc.health.v1`` needs no token: the kubelet's native gRPC probes cannot send one, and it tells nothing
but SERVING or not. A method this table does not know needs **admin**: a new RPC stays closed until it
is classified here (a unit test checks every RPC of every proto is).

A call's token arrives as ``authorization: Bearer <token>`` metadata (RFC 6750 section 2.1, as gRPC's
own call credentials send it). Tokens are compared in constant time against every configured token
(:meth:`Tokens.role_of`), so neither a match's position nor a prefix's length shows in the timing.

The REST gateway uses the same primitives: :func:`load_tokens` once, then per request
``tokens.role_of(bearer)`` and ``role >= required_role(method)``.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from meshcore.config import SecurityConfig
from meshcore.errors import PermissionDenied, Unauthenticated
from meshcore.interceptors import Behavior, Context, Handler, wrap_handler

__all__ = [
    "ADMIN_METHODS",
    "CLIENT_SERVICES",
    "OPEN_SERVICES",
    "AuthInterceptor",
    "Role",
    "TlsOnlyInterceptor",
    "Tokens",
    "bearer_token",
    "load_tokens",
    "read_token_file",
    "required_role",
]


class Role(IntEnum):
    """What a token may call; a higher role may call everything a lower one may."""

    OPEN = 0
    CLIENT = 1
    SERVICE = 2
    ADMIN = 3


OPEN_SERVICES = frozenset({"grpc.health.v1.Health"})
"""Services anyone may call: the kubelet's gRPC probes carry no credentials."""

CLIENT_SERVICES = frozenset(
    {
        "mailmesh.send.v1.SendService",
        "mailmesh.subscription.v1.SubscriptionService",
        "mailmesh.health.v1.HealthService",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    }
)
"""The externally reachable APIs (MESSAGING-API "send", "subscription", "health") and reflection."""

SERVICE_SERVICES = frozenset(
    {
        "mailmesh.ingest.v1.IngestService",
        "mailmesh.archive.v1.ArchiveService",
        "mailmesh.history.v1.HistoryQueryService",
        "mailmesh.edgepeer.v1.EdgePeerService",
    }
)
"""The mesh's internal APIs: their methods need the service role unless listed in ADMIN_METHODS."""

ADMIN_METHODS = frozenset(
    {
        # Delete or rewrite archived envelopes and the sharding that finds them (docs/archive.md).
        "/mailmesh.archive.v1.ArchiveService/DeleteBuckets",
        "/mailmesh.archive.v1.ArchiveService/Expire",
        "/mailmesh.archive.v1.ArchiveService/PutShardPlan",
        # Change whom the edge peer talks to and whom it trusts with 0x7e requests (docs/edge-peer.md).
        "/mailmesh.edgepeer.v1.EdgePeerService/AddPeer",
        "/mailmesh.edgepeer.v1.EdgePeerService/RemovePeer",
        "/mailmesh.edgepeer.v1.EdgePeerService/SetTrusted",
    }
)
"""Full method names that need the admin role."""


def required_role(method: str) -> Role:
    """The role a call of ``method`` (``/package.Service/Method``) needs; unknown methods need admin."""
    if method in ADMIN_METHODS:
        return Role.ADMIN
    service = method.lstrip("/").rpartition("/")[0]
    if service in OPEN_SERVICES:
        return Role.OPEN
    if service in CLIENT_SERVICES:
        return Role.CLIENT
    if service in SERVICE_SERVICES:
        return Role.SERVICE
    return Role.ADMIN


def _digest(token: str) -> bytes:
    # Compare digests, not tokens: equal lengths, so compare_digest's time tells nothing of a token's length.
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Tokens:
    """The accepted tokens by role, kept only as SHA-256 digests; ``sent`` is what this service sends."""

    _digests: tuple[tuple[bytes, Role], ...] = field(repr=False)
    sent: str | None = field(repr=False)
    """The token this service's own channels send (the first service token), None when auth is off."""

    @classmethod
    def of(cls, by_role: Mapping[Role, Sequence[str]], *, sent: str | None = None) -> Tokens:
        """Build from plain tokens per role (a token listed under two roles gets the higher)."""
        best: dict[str, Role] = {}
        for role, tokens in by_role.items():
            for token in tokens:
                best[token] = max(role, best.get(token, Role.OPEN))
        return cls(tuple((_digest(t), r) for t, r in best.items()), sent)

    def role_of(self, token: str | None) -> Role | None:
        """The role of ``token``, or None when it is missing or unknown; constant time in the token."""
        if not token:
            return None
        presented = _digest(token)
        found: Role | None = None
        for digest, role in self._digests:  # every entry, always: the time does not depend on the match
            if hmac.compare_digest(presented, digest):
                found = role
        return found


def read_token_file(path: str) -> list[str]:
    """The tokens in ``path``: one per line, blank lines and ``#`` comments skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def load_tokens(cfg: SecurityConfig) -> Tokens | None:
    """The tokens ``cfg`` configures (files read now), or None when token auth is off."""
    if cfg.auth != "token":
        return None

    def gather(inline: Iterable[str], file: str) -> list[str]:
        return [*inline, *(read_token_file(file) if file else [])]

    service = gather(cfg.service_tokens, cfg.service_tokens_file)
    if not service:
        raise ValueError("MAILMESH_AUTH=token but no service token is configured")
    by_role = {
        Role.CLIENT: gather(cfg.client_tokens, cfg.client_tokens_file),
        Role.SERVICE: service,
        Role.ADMIN: gather(cfg.admin_tokens, cfg.admin_tokens_file),
    }
    return Tokens.of(by_role, sent=service[0])


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the call's ``authorization: Bearer <token>`` metadata, or None."""
    for key, value in metadata or ():
        if key.lower() == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def _refuse(error: Exception) -> Callable[[Behavior, bool, bool], Behavior]:
    """A behaviour wrapper failing every call with ``error`` (the error interceptor maps its code)."""

    def wrapper(behavior: Behavior, _request_streaming: bool, response_streaming: bool) -> Behavior:
        if response_streaming and inspect.isasyncgenfunction(behavior):

            async def refuse_stream(_request: Any, _context: Context) -> AsyncIterator[Any]:
                raise error
                yield  # an async generator, like the handler it replaces

            return refuse_stream

        async def refuse(_request: Any, _context: Context) -> Any:
            raise error

        return refuse

    return wrapper


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuses calls without a token of the role their method needs (:func:`required_role`).

    No or an unknown token → UNAUTHENTICATED; a known token below the role → PERMISSION_DENIED. The refusal
    is raised inside the handler, so the metrics and error interceptors around it count and log it like any
    other failed call (at DEBUG: a stranger must not be able to fill the log); the token is never logged.
    """

    def __init__(self, tokens: Tokens, policy: Callable[[str], Role] = required_role) -> None:
        self._tokens = tokens
        self._policy = policy

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        """Pass an allowed call through untouched; otherwise answer with the refusal."""
        handler = await continuation(handler_call_details)
        method: str | bytes = handler_call_details.method
        name = method.decode() if isinstance(method, bytes) else method
        needed = self._policy(name)
        if handler is None or needed is Role.OPEN:
            return handler
        role = self._tokens.role_of(bearer_token(handler_call_details.invocation_metadata))
        if role is None:
            return wrap_handler(handler, _refuse(Unauthenticated("a valid bearer token is required")))
        if role < needed:
            return wrap_handler(
                handler, _refuse(PermissionDenied(f"this call needs the {needed.name.lower()} role"))
            )
        return handler


def _tls_only(behavior: Behavior, _request_streaming: bool, response_streaming: bool) -> Behavior:
    def check(context: Context) -> None:
        if context.auth_context().get("transport_security_type") != [b"ssl"]:
            raise Unauthenticated("this port serves only grpc.health.v1; call the TLS port")

    if response_streaming and inspect.isasyncgenfunction(behavior):

        async def tls_stream(request: Any, context: Context) -> AsyncIterator[Any]:
            check(context)
            async for response in behavior(request, context):
                yield response

        return tls_stream

    async def tls_unary(request: Any, context: Context) -> Any:
        check(context)
        return await behavior(request, context)

    return tls_unary


class TlsOnlyInterceptor(grpc.aio.ServerInterceptor):
    """With mutual TLS and a plaintext probe port: only ``grpc.health.v1`` may be called without TLS.

    The kubelet's native gRPC probes cannot do TLS, so a server with mutual TLS can add a plaintext port for
    them (``<PREFIX>_GRPC_PROBE_PORT``). A gRPC server serves every service on every port; this interceptor
    refuses every other call that did not arrive over TLS (UNAUTHENTICATED), whatever token it carries.
    """

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        """Wrap every handler but health's with the transport check."""
        handler = await continuation(handler_call_details)
        method: str | bytes = handler_call_details.method
        name = method.decode() if isinstance(method, bytes) else method
        if handler is None or required_role(name) is Role.OPEN:
            return handler
        return wrap_handler(handler, _tls_only)
