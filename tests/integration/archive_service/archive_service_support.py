"""Test support for the archive service: a running server on 127.0.0.1:0, envelopes, request builders.

Envelopes are real (wakucodec RLP, keccak hash) and sent around ``BASE``; tests keep the archive's retention
at "forever" (ARCHIVE_RETENTION_DAYS=0) so these fixed, old times stay visible on both backends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from archivestore.factory import create_store
from archivestore.protocol import ArchiveStore
from mailmesh.archive.v1 import archive_pb2 as pb
from mailmesh.archive.v1 import archive_pb2_grpc
from mailmesh.common.v1 import common_pb2
from meshcore.clients import make_channel
from meshcore.server import MeshServer
from services.archive.config import Config
from services.archive.server import Deps, build
from services.archive.servicer import SERVICE_NAME
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.pow import calculate_pow

BASE = 1_700_000_000  # 2023-11-14T22:13:20Z; an hour bucket starts at BASE - BASE % 3600
HOUR = 3600
DAY = 86_400
TTL = 50
A = bytes.fromhex("f26e7779")
B = bytes.fromhex("aabbccdd")
C = bytes.fromhex("0000ff06")
TOPICS = (A, B, C)

#: Settings every test server gets; a test adds or overrides per case.
TEST_ENV: Mapping[str, str] = {
    "ARCHIVE_GRPC_HOST": "127.0.0.1",
    "ARCHIVE_GRPC_PORT": "0",
    "ARCHIVE_METRICS_PORT": "-1",
    "ARCHIVE_SHUTDOWN_GRACE_SECONDS": "2",
    "ARCHIVE_RETENTION_DAYS": "0",
    "ARCHIVE_STATS_INTERVAL_SECONDS": "0",
    "ARCHIVE_HEALTH_PROBE_SECONDS": "0",
    "ARCHIVE_PURGE_INTERVAL_SECONDS": "0",
    "ARCHIVE_CASSANDRA_REQUEST_TIMEOUT_SECONDS": "20",
    "MAILMESH_LOG_FORMAT": "text",
}


@dataclass
class Running:
    """A started archive server, a channel and stub to it, and what it was built from."""

    cfg: Config
    mesh: MeshServer
    store: ArchiveStore
    registry: CollectorRegistry
    channel: grpc.aio.Channel
    stub: archive_pb2_grpc.ArchiveServiceAsyncStub

    @property
    def target(self) -> str:
        """``127.0.0.1:<port>`` of the server."""
        return f"127.0.0.1:{self.mesh.port}"

    async def close(self) -> None:
        """Close the channel and stop the server (which closes the store in an after-drain hook).

        Not ``grace=0``: meshcore bounds every shutdown hook by the grace, so the store could not close.
        """
        await self.channel.close()
        await self.mesh.stop()


async def start_archive(env: Mapping[str, str], *, store: ArchiveStore | None = None) -> Running:
    """Build and start the archive service from ``env`` (over :data:`TEST_ENV`) with a private registry."""
    cfg = Config.from_env({**TEST_ENV, **env})
    registry = CollectorRegistry()
    provider = TracerProvider()
    the_store = store if store is not None else create_store(cfg.store)
    mesh = build(cfg, Deps(store=the_store, registry=registry, tracer_provider=provider))
    await mesh.start()
    channel = make_channel(
        f"127.0.0.1:{mesh.port}",
        service_name=SERVICE_NAME,
        timeout_s=60,
        registry=registry,
        tracer_provider=provider,
    )
    return Running(cfg, mesh, the_store, registry, channel, archive_pb2_grpc.ArchiveServiceStub(channel))


def envelope(sent: int, topic: bytes = A, n: int = 0, *, size: int = 48, ttl: int = TTL) -> Envelope:
    """A real envelope sent at ``sent``; ``n`` and ``size`` vary its bytes."""
    seed = hashlib.sha256(f"{sent}/{topic.hex()}/{n}".encode()).digest()
    data = (seed * (size // 32 + 1))[:size]
    return make_envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=data, nonce=n)


def envelope_proto(e: Envelope, **overrides: Any) -> common_pb2.Envelope:
    """The Envelope a read answers for ``e``: every field, ``data`` left empty unless overridden."""
    fields: dict[str, Any] = {
        "rlp": e.raw,
        "hash": e.hash,
        "expiry": e.expiry,
        "ttl": e.ttl,
        "topic": e.topic,
        "nonce": e.nonce,
        "sent": e.sent,
        "pow": calculate_pow(e),
    }
    fields.update(overrides)
    return common_pb2.Envelope(**fields)


def put_item(e: Envelope, *, message_hash: bytes = b"", **overrides: Any) -> pb.PutItem:
    """The PutItem an honest producer sends for ``e``; ``overrides`` replace its ``rlp`` or ``hash``."""
    return pb.PutItem(**{"rlp": e.raw, "hash": e.hash, **overrides}, message_hash=message_hash)


async def put(
    stub: archive_pb2_grpc.ArchiveServiceAsyncStub, envs: Sequence[Envelope]
) -> pb.PutEnvelopesResponse:
    """Store ``envs`` in batches of 1000; asserts nothing was refused."""
    inserted = duplicates = 0
    for start in range(0, len(envs), 1000):
        reply = await stub.PutEnvelopes(
            pb.PutEnvelopesRequest(items=[put_item(e) for e in envs[start : start + 1000]])
        )
        assert reply.invalid == 0, [r.detail for r in reply.results if r.detail]
        inserted += reply.inserted
        duplicates += reply.duplicates
    return pb.PutEnvelopesResponse(inserted=inserted, duplicates=duplicates)


def ordered(envs: Sequence[Envelope], *, backward: bool = False) -> list[bytes]:
    """Hashes of ``envs`` in archive order."""
    return [e.hash for e in sorted(envs, key=lambda e: (e.sent, e.hash), reverse=backward)]


def time_range(lower: int = BASE - DAY, upper: int = BASE + DAY) -> common_pb2.TimeRange:
    """A sent-time range around BASE."""
    return common_pb2.TimeRange(lower=lower, upper=upper)


async def expect_status(code: grpc.StatusCode, call: Awaitable[Any]) -> str:
    """Await ``call``, assert it fails with ``code``; returns the status message."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    return info.value.details() or ""


async def collect(stream: Callable[[], Any]) -> list[Any]:
    """All messages of a server stream (``async for``, as the mesh clients must)."""
    return [m async for m in stream()]
