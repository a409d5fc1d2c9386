"""Fixtures: a real archive over SQLite on a free port, and history-query replicas in front of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import grpc.aio
import pytest

from mailmesh.archive.v1 import archive_pb2_grpc
from mailmesh.history.v1 import history_pb2_grpc
from tests.integration.history.history_support import (
    ArchiveHandle,
    HistoryHandle,
    start_archive,
    start_history,
)

HistoryFactory = Callable[..., Awaitable[HistoryHandle]]


@pytest.fixture
async def archive(tmp_path: Path) -> AsyncIterator[ArchiveHandle]:
    """A running archive service on 127.0.0.1 with a fresh SQLite file."""
    handle = await start_archive(tmp_path / "archive.db")
    try:
        yield handle
    finally:
        await handle.stop()


@pytest.fixture
async def archive_stub(archive: ArchiveHandle) -> AsyncIterator[archive_pb2_grpc.ArchiveServiceAsyncStub]:
    """A plain stub to put envelopes straight into the archive (no ingest)."""
    async with grpc.aio.insecure_channel(archive.address) as channel:
        yield archive_pb2_grpc.ArchiveServiceStub(channel)


@pytest.fixture
async def make_history(archive: ArchiveHandle) -> AsyncIterator[HistoryFactory]:
    """Start history replicas against ``archive``: ``await make_history(secrets=[...], **env)``."""
    started: list[HistoryHandle] = []

    async def factory(
        secrets: Sequence[bytes] = (b"s" * 32,), archive_address: str | None = None, **env: str
    ) -> HistoryHandle:
        handle = await start_history(archive_address or archive.address, secrets, **env)
        started.append(handle)
        return handle

    try:
        yield factory
    finally:
        for handle in started:
            await handle.stop()


@pytest.fixture
async def history(make_history: HistoryFactory) -> HistoryHandle:
    """One history replica with the default secret."""
    return await make_history()


@pytest.fixture
async def history_stub(
    history: HistoryHandle,
) -> AsyncIterator[history_pb2_grpc.HistoryQueryServiceAsyncStub]:
    """A client stub for ``history``."""
    async with grpc.aio.insecure_channel(history.address) as channel:
        yield history_pb2_grpc.HistoryQueryServiceStub(channel)
