"""Fixtures: fake ingest and history-query servers on port 0 and an edge peer in front of them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mailmesh.history.v1 import history_pb2_grpc
from mailmesh.ingest.v1 import ingest_pb2_grpc
from tests.integration.edge_peer.edge_peer_support import (
    Edge,
    FakeHistory,
    FakeIngest,
    start_edge,
    start_fake,
    stop_edge,
)


@pytest.fixture
async def ingest() -> AsyncIterator[tuple[FakeIngest, str]]:
    fake = FakeIngest()
    server, address = await start_fake(fake, ingest_pb2_grpc.add_IngestServiceServicer_to_server)
    try:
        yield fake, address
    finally:
        await server.stop(None)


@pytest.fixture
async def history() -> AsyncIterator[tuple[FakeHistory, str]]:
    fake = FakeHistory()
    server, address = await start_fake(fake, history_pb2_grpc.add_HistoryQueryServiceServicer_to_server)
    try:
        yield fake, address
    finally:
        await server.stop(None)


@pytest.fixture
async def edge(
    tmp_path: Path, ingest: tuple[FakeIngest, str], history: tuple[FakeHistory, str]
) -> AsyncIterator[Edge]:
    handle = await start_edge(tmp_path, ingest[1], history[1])
    try:
        yield handle
    finally:
        await stop_edge(handle)
