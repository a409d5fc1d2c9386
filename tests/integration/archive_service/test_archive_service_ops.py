"""Operating the archive service: health, reflection, metrics, an unreachable store, SIGTERM."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from archivestore.retention import RetentionPolicy
from archivestore.sqlite.store import SqliteStore
from mailmesh.archive.v1 import archive_pb2 as pb
from mailmesh.archive.v1 import archive_pb2_grpc
from meshharness import FreePorts, ServiceSpec, free_ports, plan, start_mesh
from services.archive.servicer import SERVICE_NAME
from tests.integration.archive_service.archive_service_support import (
    BASE,
    A,
    B,
    Running,
    envelope,
    expect_status,
    put,
    put_item,
    start_archive,
    time_range,
)

pytestmark = pytest.mark.timeout(300)

SERVING = int(health_pb2.HealthCheckResponse.SERVING)
NOT_SERVING = int(health_pb2.HealthCheckResponse.NOT_SERVING)
GRACE_S = 5.0
#: A cold interpreter imports grpc, OpenTelemetry and (for Cassandra) the driver, then connects.
START_TIMEOUT_S = 60.0


async def health(target: str, service: str) -> int:
    """One health Check of ``service`` at ``target``."""
    async with grpc.aio.insecure_channel(target) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=10
        )
        return int(reply.status)


async def eventually(what: str, check: Callable[[], Awaitable[bool]], timeout_s: float = 30.0) -> None:
    """Poll ``check`` until it is true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        await asyncio.sleep(0.05)


async def test_health_is_serving_and_reflection_lists_the_service(archive: Running) -> None:
    assert await health(archive.target, "") == SERVING
    assert await health(archive.target, SERVICE_NAME) == SERVING
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    services: set[str] = set()
    async for reply in reflection_pb2_grpc.ServerReflectionStub(archive.channel).ServerReflectionInfo(
        iter([request])
    ):
        services |= {s.name for s in reply.list_services_response.service}
    assert {SERVICE_NAME, "grpc.health.v1.Health"} <= services


def scrape(port: int) -> str:
    """The Prometheus exposition text of the metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return str(reply.read().decode())


async def test_metrics_endpoint_exposes_the_status_go_names(
    archive_env: dict[str, str], backend: str
) -> None:
    running = await start_archive({**archive_env, "ARCHIVE_METRICS_PORT": "0"})
    try:
        envs = [envelope(BASE + i, A, i, size=100 * i) for i in range(1, 4)]
        await put(running.stub, envs)
        assert running.mesh.metrics_port is not None
        text = await asyncio.to_thread(scrape, running.mesh.metrics_port)
    finally:
        await running.close()
    db = f'db="{backend}"'
    assert f"mailserver_archived_envelopes_total{{{db}}} 3.0" in text
    assert f"mailserver_archived_envelopes_failures_total{{{db}}} 0.0" in text
    # status-go observes EnvelopeHeaderLength + Size() = 20 + (20 + len(Data)) per archived envelope.
    assert (
        f"mailserver_archived_envelope_size_bytes_sum{{{db}}} {float(sum(40 + len(e.data) for e in envs))}"
        in text
    )
    assert f'mailserver_archived_envelope_size_bytes_bucket{{{db},le="1024.0"}} 3.0' in text
    assert f'mailserver_archived_envelope_size_bytes_bucket{{{db},le="1.048576e+06"}} 3.0' in text
    assert f"mailmesh_archive_put_batch_seconds_count{{{db}}} 1.0" in text
    assert f'mailmesh_archive_put_items_total{{{db},outcome="inserted"}} 3.0' in text
    assert 'grpc_server_handled_total{grpc_code="OK",grpc_method="PutEnvelopes"' in text


async def test_the_archived_gauge_is_recounted_from_the_store(tmp_path: Path) -> None:
    env = {"ARCHIVE_SQLITE_PATH": str(tmp_path / "archive.sqlite3")}
    first = await start_archive(env)
    try:
        await put(first.stub, [envelope(BASE + i, B, i) for i in range(4)])
    finally:
        await first.close()
    second = await start_archive(
        {**env, "ARCHIVE_METRICS_PORT": "0", "ARCHIVE_STATS_INTERVAL_SECONDS": "0.05"}
    )
    try:
        port = second.mesh.metrics_port
        assert port is not None

        async def recounted() -> bool:
            return 'mailserver_archived_envelopes_total{db="sqlite"} 4.0' in await asyncio.to_thread(
                scrape, port
            )

        await eventually("gauge recounted", recounted)
    finally:
        await second.close()


async def test_the_sqlite_cleaner_purges_envelopes_past_retention(tmp_path: Path) -> None:
    running = await start_archive(
        {"ARCHIVE_SQLITE_PATH": str(tmp_path / "archive.sqlite3"), "ARCHIVE_PURGE_INTERVAL_SECONDS": "0.2"}
    )
    try:
        now = int(time.time())
        short, kept = envelope(now - 10, A, 1), envelope(now - 10, A, 2)
        brief = put_item(short)
        brief.retention.seconds = 12  # visible until now + 2
        reply = await running.stub.PutEnvelopes(pb.PutEnvelopesRequest(items=[brief, put_item(kept)]))
        assert reply.inserted == 2

        async def purged() -> bool:
            value = running.registry.get_sample_value(
                "mailmesh_archive_purged_envelopes_total", {"db": "sqlite"}
            )
            return value == 1

        await eventually("the cleaner deleted the expired row", purged)
        stats = await running.stub.Stats(pb.StatsRequest(exact=True))
        assert (stats.envelope_count, stats.exact) == (1, True)  # nothing expired is left unpurged
    finally:
        await running.close()


async def test_unwritable_sqlite_path_is_unavailable_until_the_store_opens(tmp_path: Path) -> None:
    blocker = tmp_path / "later"
    blocker.write_text("a file where the database directory should be")
    running = await start_archive(
        {
            "ARCHIVE_SQLITE_PATH": str(blocker / "archive.sqlite3"),
            "ARCHIVE_STORE_RETRY_MAX_SECONDS": "0.2",
        }
    )
    try:
        assert await health(running.target, SERVICE_NAME) == NOT_SERVING
        assert await health(running.target, "") == SERVING  # the process is fine: liveness must not fail
        message = await expect_status(
            grpc.StatusCode.UNAVAILABLE,
            running.stub.PutEnvelopes(pb.PutEnvelopesRequest(items=[put_item(envelope(BASE))])),
        )
        assert message.startswith("archive store unavailable: the sqlite store is not open")
        await expect_status(
            grpc.StatusCode.UNAVAILABLE,
            running.stub.QueryEnvelopes(pb.QueryEnvelopesRequest(range=time_range(), limit=1)),
        )
        blocker.unlink()
        blocker.mkdir()

        async def serving() -> bool:
            return await health(running.target, SERVICE_NAME) == SERVING

        await eventually("store opened by the background opener", serving)
        assert (await put(running.stub, [envelope(BASE)])).inserted == 1
    finally:
        await running.close()


async def test_a_closed_sqlite_store_is_unavailable_and_not_serving(tmp_path: Path) -> None:
    running = await start_archive(
        {"ARCHIVE_SQLITE_PATH": str(tmp_path / "archive.sqlite3"), "ARCHIVE_HEALTH_PROBE_SECONDS": "0.05"}
    )
    try:
        await put(running.stub, [envelope(BASE)])
        await running.store.close()
        message = await expect_status(
            grpc.StatusCode.UNAVAILABLE,
            running.stub.PutEnvelopes(pb.PutEnvelopesRequest(items=[put_item(envelope(BASE + 1))])),
        )
        assert message.startswith("archive store unavailable: sqlite archive is not open")
        await expect_status(grpc.StatusCode.UNAVAILABLE, running.stub.Stats(pb.StatsRequest()))

        async def not_serving() -> bool:
            return await health(running.target, SERVICE_NAME) == NOT_SERVING

        await eventually("probe notices the closed store", not_serving)
    finally:
        await running.close()


@pytest.mark.cassandra
async def test_unreachable_cassandra_is_unavailable_and_not_serving() -> None:
    running = await start_archive(
        {
            "ARCHIVE_BACKEND": "cassandra",
            "ARCHIVE_CASSANDRA_PORT": str(free_ports(1)[0]),  # nothing listens there
            "ARCHIVE_CASSANDRA_CONNECT_TIMEOUT_SECONDS": "1",
            "ARCHIVE_STORE_RETRY_MAX_SECONDS": "1",
        }
    )
    try:
        assert await health(running.target, SERVICE_NAME) == NOT_SERVING
        message = await expect_status(
            grpc.StatusCode.UNAVAILABLE,
            running.stub.PutEnvelopes(pb.PutEnvelopesRequest(items=[put_item(envelope(BASE))])),
        )
        assert message.startswith(
            "archive store unavailable: the cassandra store is not open (cannot connect"
        )
        await expect_status(
            grpc.StatusCode.UNAVAILABLE,
            running.stub.GetEnvelope(pb.GetEnvelopeRequest(envelope_hash=b"\x01" * 32)),
        )
    finally:
        await running.close()


async def test_sigterm_stops_the_process_cleanly(archive_env: dict[str, str], tmp_path: Path) -> None:
    settings = {
        **archive_env,
        "ARCHIVE_RETENTION_DAYS": "0",
        "ARCHIVE_SHUTDOWN_GRACE_SECONDS": str(GRACE_S),
        "MAILMESH_LOG_FORMAT": "json",
    }

    def specs() -> list[ServiceSpec]:
        return plan(["archive"], ports=FreePorts(metrics=False), env={"archive": settings})

    mesh = await asyncio.to_thread(
        start_mesh, specs, timeout=START_TIMEOUT_S
    )  # waits for SERVICE_NAME SERVING
    archive = mesh.get("archive")
    try:
        kept = envelope(BASE, A, 7)
        async with grpc.aio.insecure_channel(archive.address) as channel:
            reply = await archive_pb2_grpc.ArchiveServiceStub(channel).PutEnvelopes(
                pb.PutEnvelopesRequest(items=[put_item(kept)]), timeout=30
            )
            assert reply.inserted == 1
    finally:
        # The harness's grace is generous (a loaded machine); the process must exit on its own, not be killed.
        code = await archive.stop_async(START_TIMEOUT_S)
    assert code == 0 and not archive.killed, archive.logs.tail()
    assert "stopped" in archive.logs.messages()
    if archive_env["ARCHIVE_BACKEND"] == "sqlite":  # the store was closed cleanly and kept the envelope
        store = SqliteStore(archive_env["ARCHIVE_SQLITE_PATH"], RetentionPolicy(default_s=None))
        await store.open()
        try:
            assert await store.contains([kept.hash], now=BASE) == [True]
        finally:
            await store.close()
