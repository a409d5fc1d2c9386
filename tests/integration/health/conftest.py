"""Fixtures: a real archive over SQLite, real edge peers (fake ingest and history behind them), the health
service in front of them on port 0, and real wakunode RLPx clients to connect to the edge peers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from mailmesh.history.v1 import history_pb2_grpc
from mailmesh.ingest.v1 import ingest_pb2_grpc
from tests.integration.edge_peer.edge_peer_support import (
    Edge,
    FakeHistory,
    FakeIngest,
    request_client,
    start_edge,
    start_fake,
    stop_edge,
)
from tests.integration.health.health_support import HealthHandle, start_health
from tests.integration.history.history_support import ArchiveHandle, start_archive
from wakunode.client import WakuClient

EdgeFactory = Callable[..., Awaitable[Edge]]
HealthFactory = Callable[..., Awaitable[HealthHandle]]
ClientFactory = Callable[[], Awaitable[WakuClient]]


@pytest.fixture
async def archive(tmp_path: Path) -> AsyncIterator[ArchiveHandle]:
    """The real archive service over a fresh SQLite file (stop() may be called by the test; twice is safe)."""
    handle = await start_archive(tmp_path / "archive.db")
    try:
        yield handle
    finally:
        await handle.stop()


@pytest.fixture
async def make_edge(tmp_path: Path) -> AsyncIterator[EdgeFactory]:
    """Start real edge peers (devp2p + gRPC) in front of one fake ingest and one fake history-query:
    ``await make_edge(name, **EDGE_env)``."""
    ingest_server, ingest_address = await start_fake(
        FakeIngest(), ingest_pb2_grpc.add_IngestServiceServicer_to_server
    )
    history_server, history_address = await start_fake(
        FakeHistory(), history_pb2_grpc.add_HistoryQueryServiceServicer_to_server
    )
    started: list[Edge] = []

    async def factory(name: str, **env: str) -> Edge:
        home = tmp_path / name
        home.mkdir()
        handle = await start_edge(home, ingest_address, history_address, EDGE_INSTANCE=name, **env)
        started.append(handle)
        return handle

    try:
        yield factory
    finally:
        for handle in started:
            await stop_edge(handle)
        await ingest_server.stop(None)
        await history_server.stop(None)


@pytest.fixture
async def make_health() -> AsyncIterator[HealthFactory]:
    """Start health services: ``await make_health(edge_addresses, archive_addresses, **env)``."""
    started: list[HealthHandle] = []

    async def factory(edge_peers: list[str], archives: list[str], **env: str) -> HealthHandle:
        handle = await start_health(edge_peers, archives, **env)
        started.append(handle)
        return handle

    try:
        yield factory
    finally:
        for handle in started:
            await handle.stop()


@pytest.fixture
async def make_client() -> AsyncIterator[ClientFactory]:
    """Started wakunode clients (dial-only), stopped at the end if the test did not stop them."""
    clients: list[WakuClient] = []

    async def factory() -> WakuClient:
        client = request_client()
        await client.start()
        clients.append(client)
        return client

    try:
        yield factory
    finally:
        for client in clients:
            await client.stop()
