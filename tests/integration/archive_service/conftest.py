"""Fixtures: the archive service over real gRPC, once per backend (SQLite temp file, the local Cassandra).

Tests that take ``archive`` or ``archive_env`` run twice: ``[sqlite]`` and ``[cassandra]`` (marked
``cassandra``). The Cassandra variant uses a keyspace of its own per test module (``mmt_<module>_<pid>``,
emptied before each test, dropped at the end) on the shared node; when the node does not answer, the test
fails with the reason and ``make cassandra-start`` — it never skips.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.archive_service.archive_service_support import Running, start_archive

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace


@pytest.fixture(params=["sqlite", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend of this test run."""
    return str(request.param)


@pytest.fixture
def archive_env(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """Environment for an archive service on ``backend``, on empty storage."""
    if backend == "sqlite":
        return {"ARCHIVE_BACKEND": "sqlite", "ARCHIVE_SQLITE_PATH": str(tmp_path / "archive.sqlite3")}
    node = request.getfixturevalue("cassandra_node")
    keyspace = request.getfixturevalue("cassandra_keyspace")
    cf.truncate_keyspace(request.getfixturevalue("cassandra_admin"), keyspace)
    return {
        "ARCHIVE_BACKEND": "cassandra",
        "ARCHIVE_CASSANDRA_HOSTS": node.host,
        "ARCHIVE_CASSANDRA_PORT": str(node.native_port),
        "ARCHIVE_CASSANDRA_KEYSPACE": keyspace,
    }


@pytest.fixture
async def archive(archive_env: dict[str, str]) -> AsyncIterator[Running]:
    """A started archive service on empty storage, with a channel and stub."""
    running = await start_archive(archive_env)
    try:
        yield running
    finally:
        await running.close()
