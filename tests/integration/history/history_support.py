"""Helpers for history's integration tests: start archive and history servers, put envelopes, run queries."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from archivestore.factory import create_store
from archivestore.types import Direction
from mailmesh.archive.v1 import archive_pb2
from mailmesh.common.v1 import common_pb2
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from meshcore import MeshServer
from services.history.clients import ArchiveReader
from services.history.config import Config
from services.history.server import Deps, build
from tests.integration.history.history_archive_double import start_archive_double
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.responses import split_sized

BASE = 1_700_000_000
DIRECTION = {
    Direction.FORWARD: common_pb2.DIRECTION_FORWARD,
    Direction.BACKWARD: common_pb2.DIRECTION_BACKWARD,
}


@dataclass
class ArchiveHandle:
    """A running archive service."""

    mesh: MeshServer
    closers: list[Any] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.mesh.port}"

    async def stop(self) -> None:
        await self.mesh.stop(1)  # the grace also bounds the hooks that close the store
        for close in self.closers:
            await close()


@dataclass
class HistoryHandle:
    """A running history-query replica."""

    mesh: MeshServer
    client: ArchiveReader
    registry: CollectorRegistry

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.mesh.port}"

    async def stop(self) -> None:
        await self.mesh.stop(0)
        await self.client.close()

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.registry.get_sample_value(name, labels or {}) or 0.0


async def start_archive(path: Path, *, double: bool = False) -> ArchiveHandle:
    """The archive service on 127.0.0.1:0 over SQLite at ``path``, envelopes kept forever.

    The real one (``services.archive.server``) when it is importable, else the test double over SqliteStore
    (``history_archive_double``); ``double=True`` or ``HISTORY_TEST_ARCHIVE=double`` forces the double.
    """
    try:
        if double or os.environ.get("HISTORY_TEST_ARCHIVE") == "double":
            raise ImportError("the double was asked for")
        from services.archive.config import Config as ArchiveConfig
        from services.archive.server import Deps as ArchiveDeps
        from services.archive.server import build as build_archive
    except ImportError:
        mesh, _store = await start_archive_double(path)
        return ArchiveHandle(mesh)
    cfg = ArchiveConfig.from_env(
        {
            "ARCHIVE_GRPC_HOST": "127.0.0.1",
            "ARCHIVE_GRPC_PORT": "0",
            "ARCHIVE_METRICS_PORT": "-1",
            "ARCHIVE_SHUTDOWN_GRACE_SECONDS": "1",
            "ARCHIVE_BACKEND": "sqlite",
            "ARCHIVE_SQLITE_PATH": str(path),
            "ARCHIVE_RETENTION_DAYS": "0",
            "ARCHIVE_PURGE_INTERVAL_SECONDS": "0",
            "ARCHIVE_STATS_INTERVAL_SECONDS": "0",
        }
    )
    mesh = build_archive(cfg, ArchiveDeps(store=create_store(cfg.store), registry=CollectorRegistry()))
    await mesh.start()
    return ArchiveHandle(mesh)


def history_config(archive_address: str, secrets: Sequence[bytes], **env: str) -> Config:
    return Config.from_env(
        {
            "HISTORY_GRPC_HOST": "127.0.0.1",
            "HISTORY_GRPC_PORT": "0",
            "HISTORY_METRICS_PORT": "-1",
            "HISTORY_SHUTDOWN_GRACE_SECONDS": "1",
            "HISTORY_ARCHIVE_ADDR": archive_address,
            "HISTORY_CURSOR_SECRETS": ",".join(s.hex() for s in secrets),
            **env,
        }
    )


async def start_history(archive_address: str, secrets: Sequence[bytes], **env: str) -> HistoryHandle:
    """A started history replica (port 0, private metrics registry) against ``archive_address``."""
    cfg = history_config(archive_address, secrets, **env)
    registry = CollectorRegistry()
    client = ArchiveReader.connect(cfg, registry=registry)
    mesh = build(cfg, Deps(archive=client, cursor_secrets=cfg.cursor_secrets, registry=registry))
    await mesh.start()
    return HistoryHandle(mesh, client, registry)


def make_envelopes(
    sents: Iterable[int], topic: bytes, *, data_size: int = 16, tag: int = 0
) -> list[Envelope]:
    """Real envelopes (one per sent time; nonces differ so equal sent times give distinct hashes)."""
    return [
        make_envelope(
            expiry=s + 50, ttl=50, topic=topic, data=bytes([i % 256]) * data_size, nonce=tag * 100_000 + i
        )
        for i, s in enumerate(sents)
    ]


async def put(stub: Any, envelopes: Sequence[Envelope]) -> None:
    """PutEnvelopes in chunks of 500; every item must be inserted."""
    for start in range(0, len(envelopes), 500):
        chunk = envelopes[start : start + 500]
        request = archive_pb2.PutEnvelopesRequest(
            items=[archive_pb2.PutItem(rlp=e.raw, hash=e.hash) for e in chunk]
        )
        reply = await stub.PutEnvelopes(request, timeout=30)
        assert reply.inserted == len(chunk), reply


@dataclass
class QueryResult:
    batches: list[list[bytes]]
    complete: history_pb2.HistoryComplete

    @property
    def envelopes(self) -> list[bytes]:
        return [raw for batch in self.batches for raw in batch]


async def query(
    stub: history_pb2_grpc.HistoryQueryServiceAsyncStub, timeout: float = 30, **fields: Any
) -> QueryResult:
    """Run one Query; checks the stream shape (batches, then exactly one completion, last)."""
    batches: list[list[bytes]] = []
    complete: history_pb2.HistoryComplete | None = None
    async for response in stub.Query(history_pb2.HistoryQueryRequest(**fields), timeout=timeout):
        assert complete is None, "a message after the completion"
        if response.HasField("batch"):
            batch = split_sized(response.batch.envelopes_rlp, response.batch.envelope_sizes)
            assert len(batch) > 0
            batches.append(batch)
        else:
            assert response.HasField("complete")
            complete = response.complete
    assert complete is not None, "no completion"
    assert complete.delivered == sum(map(len, batches))
    return QueryResult(batches, complete)


async def page_through(
    stub: history_pb2_grpc.HistoryQueryServiceAsyncStub, max_pages: int = 500, **fields: Any
) -> list[QueryResult]:
    """Every page of a query, following next_cursor until it is empty."""
    pages: list[QueryResult] = []
    cursor = b""
    for _ in range(max_pages):
        result = await query(stub, **fields, cursor=cursor)
        pages.append(result)
        if not result.complete.next_cursor:
            return pages
        assert len(result.complete.next_cursor) == 36
        assert result.complete.last_envelope_hash == _last_hash(result)
        cursor = result.complete.next_cursor
    raise AssertionError("did not finish")


def _last_hash(result: QueryResult) -> bytes:
    from wakucodec.keccak import keccak256

    return keccak256(result.envelopes[-1])


def expected_order(envelopes: Iterable[Envelope], direction: Direction) -> list[bytes]:
    """Raw envelopes in the archive's (sent, hash) order for ``direction``."""
    ordered = sorted(envelopes, key=lambda e: (e.sent, e.hash), reverse=direction is Direction.BACKWARD)
    return [e.raw for e in ordered]
