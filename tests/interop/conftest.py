"""Fixtures shared by the interop tests: the Go peers (built once) and one mesh for the whole package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.e2e_rlpx_support import Mesh, mesh_fixture
from tests.interop.peers_support import MS_PASSWORD, build_interop_peers


@pytest.fixture(scope="session")
def interop_peers() -> None:
    build_interop_peers()  # fails (never skips) with make's output when Go cannot build the peers here


@pytest.fixture(scope="package")
def mesh(tmp_path_factory: pytest.TempPathFactory, interop_peers: None) -> Iterator[Mesh]:
    """archive (SQLite) + ingest + history-query + one edge peer, as processes (tests/e2e's runner)."""
    env = {"EDGE_MAILSERVER_PASSWORDS": MS_PASSWORD}
    yield from mesh_fixture(tmp_path_factory.mktemp("interop-mesh"), replicas=1, edge_env=env)
