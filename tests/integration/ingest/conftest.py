"""Fixtures: the real archive service over SQLite on a free port, and ingest servers in front of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

# After the registration, so the helpers' asserts are rewritten.
from tests.integration.ingest.ingest_support import (
    ArchiveHandle,
    ArchiveView,
    IngestHandle,
    start_archive,
    start_ingest,
)

IngestFactory = Callable[..., Awaitable[IngestHandle]]


@pytest.fixture
async def archive(tmp_path: Path) -> AsyncIterator[ArchiveHandle]:
    """A running archive service on 127.0.0.1 with a fresh SQLite file."""
    handle = await start_archive(tmp_path / "archive.sqlite3")
    try:
        yield handle
    finally:
        await handle.stop()


@pytest.fixture
async def archive_view(archive: ArchiveHandle) -> AsyncIterator[ArchiveView]:
    """Reads the archive over gRPC."""
    view = ArchiveView(archive.address)
    try:
        yield view
    finally:
        await view.close()


@pytest.fixture
async def make_ingest(archive: ArchiveHandle) -> AsyncIterator[IngestFactory]:
    """Start ingest servers against ``archive``: ``await make_ingest(INGEST_MIN_POW="0", ...)``."""
    started: list[IngestHandle] = []

    async def factory(**env: str) -> IngestHandle:
        handle = await start_ingest(archive.address, **env)
        started.append(handle)
        return handle

    try:
        yield factory
    finally:
        for handle in started:
            await handle.stop()


@pytest.fixture
async def ingest(make_ingest: IngestFactory) -> IngestHandle:
    """One ingest server with the default configuration."""
    return await make_ingest()
