"""The health service checks every instance behind a dns: name, over real gRPC against real archives: the
name resolves (an injected resolver, as a headless Service's DNS would) to two archive replicas, each is
checked and reported; one stopped shows as unreachable while the other keeps the node's archive criterion;
re-resolution (driven by hand) drops a removed replica, its metric series included, and adds a new one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mailmesh.health.v1 import health_pb2
from tests.integration.health.conftest import EdgeFactory
from tests.integration.health.health_support import start_health_resolving
from tests.integration.history.history_support import ArchiveHandle, start_archive

ARCHIVES = "dns:///archive-headless.mesh.svc:50053"
SERVING = health_pb2.SERVING_STATUS_SERVING
UNREACHABLE = health_pb2.SERVING_STATUS_UNREACHABLE


class Zone:
    """The headless Service's records as the test sets them (each replica on its own port here)."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append((host, port))
        return list(self.addresses)


def archives(report: health_pb2.HealthReport) -> dict[str, int]:
    return {s.target: s.status for s in report.services if s.service == "archive"}


async def test_every_archive_replica_behind_a_dns_name_is_checked_and_followed(
    archive: ArchiveHandle, make_edge: EdgeFactory, tmp_path: Path
) -> None:
    second = await start_archive(tmp_path / "second.db")
    third: ArchiveHandle | None = None
    edge = await make_edge("edge-a")
    zone = Zone(archive.address, second.address)
    health = await start_health_resolving(
        zone,
        [f"127.0.0.1:{edge.mesh.port}"],
        [ARCHIVES],
        HEALTH_WATCH_MIN_INTERVAL_SECONDS="0",
        HEALTH_DISCOVERY_INTERVAL_SECONDS="3600",  # re-resolved by hand below
    )
    try:
        # The first evaluation waited for the first resolution: both replicas are in it.
        first = await health.report()
        assert zone.asked == [("archive-headless.mesh.svc", 50053)]
        assert archives(first) == {archive.address: SERVING, second.address: SERVING}
        assert all(s.affects_status for s in first.services if s.service == "archive")

        watch = health.watch(health_pb2.WATCH_MODE_ANY)
        await archive.stop()
        report = (await watch.until(lambda r: archives(r).get(archive.address) == UNREACHABLE)).report
        assert archives(report)[second.address] == SERVING
        # One replica SERVING is enough: the archive criterion still holds.
        assert health_pb2.HEALTH_REASON_CODE_ARCHIVE_UNAVAILABLE not in [r.code for r in report.reasons]

        third = await start_archive(tmp_path / "third.db")
        zone.addresses = [second.address, third.address]  # the stopped pod replaced
        targets = health.deps.targets
        assert targets is not None
        assert await targets.instances.refresh()
        both = {second.address: SERVING, third.address: SERVING}
        await watch.until(lambda r: archives(r) == both)
        gone = {"service": "archive", "target": archive.address}
        assert health.metric("mailmesh_health_service_serving", gone) is None
        kept = {"service": "archive", "target": third.address}
        assert health.metric("mailmesh_health_service_serving", kept) == 1
        watch.cancel()
    finally:
        await health.stop()
        await second.stop()
        if third is not None:
            await third.stop()
