"""Ingest → archive service → Cassandra, with the Cassandra node stopped mid-ingest (issue 3, fault tests).

The whole write path is real: the ingest service and the archive service run in-process over gRPC on loopback,
the archive uses the Cassandra adapter on the shared local node. While batches stream in, the node is stopped:
ingest must answer UNAVAILABLE within a bounded time (never hang, never acknowledge what is not durable), and
once the node is back the very same ingest and archive servers resume without a restart. Every envelope ingest
acknowledged — before, during and after the outage — is in the archive at the end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry

from archivestore.factory import create_store
from mailmesh.ingest.v1 import ingest_pb2
from meshcore import MeshServer
from services.archive.config import Config as ArchiveConfig
from services.archive.server import Deps as ArchiveDeps
from services.archive.server import build as build_archive
from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.ingest.ingest_support import (
    ArchiveView,
    IngestHandle,
    make_envelopes,
    now_stamp,
    start_ingest,
)
from tools.cassandra import ctl
from wakucodec.envelope import Envelope

pytestmark = [pytest.mark.cassandra, pytest.mark.timeout(900)]

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace

BATCH = 40
#: An ingest call against a dead archive store must end within this (archive timeout + retries + slack).
FAIL_WITHIN_S = 30.0
#: After the node answers CQL again, ingest must be acknowledging within this.
RECOVER_WITHIN_S = 120.0


@dataclass
class Path3:
    """The three live pieces: archive server, ingest server, and a gRPC view of the archive."""

    archive: MeshServer
    ingest: IngestHandle
    view: ArchiveView


@pytest.fixture
async def path(
    cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> AsyncIterator[Path3]:
    cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
    cfg = ArchiveConfig.from_env(
        {
            "ARCHIVE_GRPC_HOST": "127.0.0.1",
            "ARCHIVE_GRPC_PORT": "0",
            "ARCHIVE_METRICS_PORT": "-1",
            "ARCHIVE_SHUTDOWN_GRACE_SECONDS": "1",
            "ARCHIVE_BACKEND": "cassandra",
            "ARCHIVE_CASSANDRA_HOSTS": cassandra_node.host,
            "ARCHIVE_CASSANDRA_PORT": str(cassandra_node.native_port),
            "ARCHIVE_CASSANDRA_KEYSPACE": cassandra_keyspace,
            "ARCHIVE_CASSANDRA_REQUEST_TIMEOUT_SECONDS": "3",
            "ARCHIVE_CASSANDRA_CONNECT_TIMEOUT_SECONDS": "2",
            "ARCHIVE_STATS_INTERVAL_SECONDS": "0",
            "ARCHIVE_HEALTH_PROBE_SECONDS": "0",
        }
    )
    archive = build_archive(cfg, ArchiveDeps(store=create_store(cfg.store), registry=CollectorRegistry()))
    await archive.start()
    address = f"127.0.0.1:{archive.port}"
    # Long-lived unsealed envelopes (they must outlive the outage), so no minimum PoW here.
    ingest = await start_ingest(
        address, INGEST_ARCHIVE_TIMEOUT_SECONDS="8", INGEST_ARCHIVE_RETRY_ATTEMPTS="1", INGEST_MIN_POW="0"
    )
    view = ArchiveView(address)
    try:
        yield Path3(archive, ingest, view)
    finally:
        await view.close()
        await ingest.stop()
        await archive.stop(1)


async def ingest_batch(ingest: IngestHandle, envs: list[Envelope], batch_id: int) -> bool:
    """One IngestBatch call: True when acknowledged (all accepted or duplicate), False on UNAVAILABLE."""
    request = ingest_pb2.IngestBatchRequest(
        batch=ingest_pb2.IngestBatch(
            batch_id=batch_id, envelopes=[e.raw for e in envs], received_at=now_stamp()
        )
    )
    try:
        reply = await ingest.stub.IngestBatch(request, timeout=FAIL_WITHIN_S)
    except grpc.aio.AioRpcError as err:
        assert err.code() is grpc.StatusCode.UNAVAILABLE, f"{err.code()}: {err.details()}"
        return False
    assert not reply.ack.rejections, reply.ack.rejections
    assert reply.ack.accepted + reply.ack.duplicates == len(envs)
    return True


async def until(what: str, deadline_s: float, attempt: Any) -> None:
    """Poll ``attempt`` (an async no-arg callable) until it returns True, failing after ``deadline_s``."""
    began = time.monotonic()
    while not await attempt():
        if time.monotonic() - began > deadline_s:
            pytest.fail(f"{what}: not within {deadline_s:.0f} s")
        await asyncio.sleep(0.5)  # poll interval, not synchronisation


async def test_cassandra_stopped_mid_ingest_is_unavailable_then_resumes_losing_nothing(
    path: Path3, cassandra_node: ctl.NodeConfig
) -> None:
    batches = [make_envelopes(BATCH, tag=n, ttl=3600) for n in range(400)]
    acked: list[Envelope] = []
    for n in range(3):  # acknowledged before the outage
        assert await ingest_batch(path.ingest, batches[n], n)
        acked.extend(batches[n])

    stopper = asyncio.create_task(asyncio.to_thread(ctl.stop, cassandra_node))
    n = 3
    try:
        # Keep ingesting while the node drains and exits: calls succeed until one is refused, each bounded.
        while True:
            assert n < len(batches), "ingest kept acknowledging while Cassandra was down"
            began = time.monotonic()
            ok = await ingest_batch(path.ingest, batches[n], n)
            assert time.monotonic() - began < FAIL_WITHIN_S
            if not ok:
                break
            acked.extend(batches[n])
            n += 1
        await stopper
        began = time.monotonic()
        assert not await ingest_batch(path.ingest, batches[n], n)  # down: refused, not hung, not acknowledged
        assert time.monotonic() - began < FAIL_WITHIN_S
    finally:
        await asyncio.gather(stopper, return_exceptions=True)
        await asyncio.to_thread(ctl.start, cassandra_node)
    cf.wait_for_node(cassandra_node)

    # The same servers recover on their own; the refused batch is simply sent again (idempotent).
    await until(
        "ingest acknowledges again", RECOVER_WITHIN_S, lambda: ingest_batch(path.ingest, batches[n], n)
    )
    acked.extend(batches[n])
    for m in range(n + 1, n + 3):
        assert await ingest_batch(path.ingest, batches[m], m)
        acked.extend(batches[m])

    present = await path.view.present(e.hash for e in acked)
    assert present == {e.hash for e in acked}
