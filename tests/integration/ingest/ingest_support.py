"""Helpers for ingest's integration tests: a real archive (SQLite) in-process, ingest in-process or as a
process, envelope factories, stream clients, and archive checks over gRPC.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from google.protobuf import timestamp_pb2
from prometheus_client import CollectorRegistry

from archivestore.factory import create_store
from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from mailmesh.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from meshcore import MeshServer
from meshharness import FreePorts, ServiceProcess, ServiceSpec, plan, start_mesh
from services.archive.config import Config as ArchiveConfig
from services.archive.server import Deps as ArchiveDeps
from services.archive.server import build as build_archive
from services.ingest.config import Config
from services.ingest.server import Deps, build, connect
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.pow import calculate_pow

REPO = Path(__file__).resolve().parents[3]
TOPIC = bytes.fromhex("5a5a0001")
WAIT = 30.0  # generous bound for any single step (a cold subprocess imports grpc and OpenTelemetry)


# ------------------------------------------------------------------------------------------ archive


@dataclass
class ArchiveHandle:
    """The real archive service, in-process, over one SQLite file; stops and restarts on the same port."""

    path: Path
    port: int = 0
    mesh: MeshServer | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        cfg = ArchiveConfig.from_env(
            {
                "ARCHIVE_GRPC_HOST": "127.0.0.1",
                "ARCHIVE_GRPC_PORT": str(self.port),
                "ARCHIVE_METRICS_PORT": "-1",
                "ARCHIVE_SHUTDOWN_GRACE_SECONDS": "1",
                "ARCHIVE_BACKEND": "sqlite",
                "ARCHIVE_SQLITE_PATH": str(self.path),
                "ARCHIVE_RETENTION_DAYS": "0",
                "ARCHIVE_PURGE_INTERVAL_SECONDS": "0",
                "ARCHIVE_STATS_INTERVAL_SECONDS": "0",
            }
        )
        self.mesh = build_archive(
            cfg, ArchiveDeps(store=create_store(cfg.store), registry=CollectorRegistry())
        )
        await self.mesh.start()
        self.port = self.mesh.port

    async def stop(self) -> None:
        if self.mesh is not None:
            await self.mesh.stop(1)  # in-flight calls get 1 s, then are cut off; the store closes cleanly
            self.mesh = None


async def start_archive(path: Path) -> ArchiveHandle:
    handle = ArchiveHandle(path)
    await handle.start()
    return handle


class ArchiveView:
    """Reads the archive over its gRPC API to check what ingest wrote."""

    def __init__(self, address: str) -> None:
        # Short reconnect back-off: tests restart the archive and read it again at once.
        self._channel = grpc.aio.insecure_channel(
            address,
            options=[("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)],
        )
        self.stub = archive_pb2_grpc.ArchiveServiceStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def present(self, hashes: Iterable[bytes]) -> set[bytes]:
        """The envelope hashes among ``hashes`` that are archived."""
        wanted = list(hashes)
        found: set[bytes] = set()
        for start in range(0, len(wanted), 1000):
            reply = await self.stub.ContainsEnvelopes(
                archive_pb2.ContainsEnvelopesRequest(envelope_hashes=wanted[start : start + 1000]),
                timeout=WAIT,
                wait_for_ready=True,
            )
            found.update(reply.present_envelope_hashes)
        return found

    async def count(self) -> int:
        """Exact number of archived envelopes."""
        reply = await self.stub.Stats(archive_pb2.StatsRequest(exact=True), timeout=WAIT, wait_for_ready=True)
        return int(reply.envelope_count)

    async def by_message_hash(self, message_hash: bytes) -> archive_pb2.GetEnvelopeResponse:
        return await self.stub.GetEnvelope(
            archive_pb2.GetEnvelopeRequest(message_hash=message_hash), timeout=WAIT
        )


# ------------------------------------------------------------------------------------------ ingest in-process


def ingest_config(archive_address: str, **env: str) -> Config:
    return Config.from_env(
        {
            "INGEST_GRPC_HOST": "127.0.0.1",
            "INGEST_GRPC_PORT": "0",
            "INGEST_METRICS_PORT": "-1",
            "INGEST_SHUTDOWN_GRACE_SECONDS": "2",
            "INGEST_ARCHIVE_ADDR": archive_address,
            "INGEST_ARCHIVE_TIMEOUT_SECONDS": "20",  # generous: a loaded CI machine must not fail happy paths
            "INGEST_ARCHIVE_RECONNECT_MAX_SECONDS": "0.5",
            **env,
        }
    )


@dataclass
class IngestHandle:
    """A started in-process ingest server and a client stub for it."""

    mesh: MeshServer
    registry: CollectorRegistry
    channel: grpc.aio.Channel
    stub: ingest_pb2_grpc.IngestServiceAsyncStub

    async def stop(self) -> None:
        await self.mesh.stop(1)
        await self.channel.close()

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def handled(self, method: str, code: str) -> float:
        """How many calls of ``method`` the server ended with ``code`` (Go spelling, e.g. "Unavailable")."""
        return self.metric(
            "grpc_server_handled_total",
            grpc_type="bidi_stream" if method == "Ingest" else "unary",
            grpc_service="mailmesh.ingest.v1.IngestService",
            grpc_method=method,
            grpc_code=code,
        )


async def start_ingest(archive_address: str, **env: str) -> IngestHandle:
    cfg = ingest_config(archive_address, **env)
    registry = CollectorRegistry()
    deps = await connect(cfg, registry=registry)
    mesh = build(cfg, Deps(deps.ingestor, closers=deps.closers, registry=registry))
    await mesh.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}")
    return IngestHandle(mesh, registry, channel, ingest_pb2_grpc.IngestServiceStub(channel))


# ------------------------------------------------------------------------------------------ ingest process


async def spawn_ingest(archive_address: str, **env: str) -> ServiceProcess:
    """Start the ingest service as a process (the harness) and wait (bounded) until it reports SERVING."""

    def specs() -> list[ServiceSpec]:
        settings = {
            "INGEST_ARCHIVE_ADDR": archive_address,
            "INGEST_ARCHIVE_RECONNECT_MAX_SECONDS": "0.5",
            "INGEST_ARCHIVE_TIMEOUT_SECONDS": "20",
            **env,
        }
        return plan(["ingest"], ports=FreePorts(metrics=False), env={"ingest": settings})

    mesh = await asyncio.to_thread(start_mesh, specs, timeout=WAIT)
    return mesh.get("ingest")


# ----------------------------------------------------------------------------------- envelopes, clients


def now_stamp(at: float | None = None) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int((time.time() if at is None else at) * 1e9))
    return stamp


def make_envelopes(
    count: int,
    *,
    data_size: int = 1024,
    tag: int = 0,
    ttl: int = 120,
    sent: int | None = None,
    topic: bytes = TOPIC,
) -> list[Envelope]:
    """Distinct envelopes sent now (or at ``sent``), each with ``data_size`` bytes of data."""
    base = int(time.time()) if sent is None else sent
    pad = b"\xa5" * max(data_size - 12, 0)
    return [
        make_envelope(
            expiry=base + ttl, ttl=ttl, topic=topic, data=tag.to_bytes(4, "big") + i.to_bytes(8, "big") + pad
        )
        for i in range(count)
    ]


def low_pow_envelope(min_pow: float) -> Envelope:
    """A fresh envelope whose PoW (no mining, a long TTL) is below ``min_pow``."""
    base = int(time.time())
    nonce = 0
    while True:
        env = make_envelope(expiry=base + 100_000, ttl=100_000, topic=TOPIC, data=b"\x01" * 1024, nonce=nonce)
        if calculate_pow(env) < min_pow:
            return env
        nonce += 1


def batches_of(
    envelopes: Sequence[Envelope], size: int, *, first_id: int = 1
) -> list[ingest_pb2.IngestBatch]:
    stamp = now_stamp()
    return [
        ingest_pb2.IngestBatch(
            batch_id=first_id + n,
            envelopes=[e.raw for e in envelopes[start : start + size]],
            received_at=stamp,
            source="test",
        )
        for n, start in enumerate(range(0, len(envelopes), size))
    ]


#: What grpc-python's aio client reports instead of the server's status when it was still writing as the
#: server ended the stream (grpc/grpc#36066; fix proposed in grpc/grpc#43486).
CLIENT_WRITE_RACE = "Internal error from Core"


def assert_ended_unavailable(
    error: grpc.aio.AioRpcError | None, *, server: IngestHandle | None = None, message: str = ""
) -> None:
    """The stream ended with UNAVAILABLE (and ``message``), as the server sent it.

    grpc#36066: a client still writing when the server ends the stream may see INTERNAL "Internal error from
    Core" instead. That is accepted only when the server's own metrics show the Ingest call ended UNAVAILABLE
    (or, with no server at hand, when the server process is known to be gone).
    """
    assert error is not None, "the stream ended OK"
    if error.code() == grpc.StatusCode.UNAVAILABLE:
        assert message in (error.details() or ""), error.details()
        return
    assert error.code() == grpc.StatusCode.INTERNAL and CLIENT_WRITE_RACE in (error.details() or ""), error
    if server is not None:
        assert server.handled("Ingest", "Unavailable") >= 1, "the server did not end the stream UNAVAILABLE"


@dataclass
class StreamResult:
    """What one Ingest stream returned: the acks by batch id, and the status it ended with."""

    acks: dict[int, ingest_pb2.IngestAck]
    error: grpc.aio.AioRpcError | None
    order: list[int] = field(default_factory=list)


async def run_stream(
    stub: ingest_pb2_grpc.IngestServiceAsyncStub,
    batches: Sequence[ingest_pb2.IngestBatch] | AsyncIterator[ingest_pb2.IngestBatch],
    *,
    timeout: float = 120,
) -> StreamResult:
    """Stream ``batches`` over one Ingest call and collect every ack until the call ends."""
    result = StreamResult({}, None)
    requests: Any = iter(batches) if isinstance(batches, Sequence) else batches
    try:
        async for ack in stub.Ingest(requests, timeout=timeout):
            assert ack.batch_id not in result.acks, f"batch {ack.batch_id} acknowledged twice"
            result.acks[ack.batch_id] = ack
            result.order.append(ack.batch_id)
    except grpc.aio.AioRpcError as err:
        result.error = err
    return result
