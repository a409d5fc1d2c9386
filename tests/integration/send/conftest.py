"""Fixtures: the mesh a send replica calls (real archive, ingest, history-query and edge peer)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.send.send_support import Mesh, start_mesh


@pytest.fixture
async def mesh(tmp_path: Path) -> AsyncIterator[Mesh]:
    """Archive, ingest, history-query and one edge peer on port 0; no Waku peer connected yet."""
    started = await start_mesh(tmp_path)
    try:
        yield started
    finally:
        await started.close()
