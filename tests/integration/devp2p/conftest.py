"""Fixtures for the devp2p integration tests (real loopback sockets, port 0)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.integration.devp2p.support import RawClient


@pytest.fixture(autouse=True)
async def close_raw_clients() -> AsyncIterator[None]:
    """Abort every RawClient a test opened, so no socket outlives its test."""
    RawClient.opened.clear()
    yield
    for client in RawClient.opened:
        client.close()
    RawClient.opened.clear()
