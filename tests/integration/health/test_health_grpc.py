"""The health service over real gRPC against real edge peers (real wakunode RLPx peers) and a real archive."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health as grpc_health
from grpc_health.v1 import health_pb2 as grpc_health_pb2
from grpc_health.v1 import health_pb2_grpc as grpc_health_pb2_grpc

from mailmesh.common.v1 import common_pb2
from mailmesh.edgepeer.v1 import edgepeer_pb2
from mailmesh.health.v1 import health_pb2
from tests.integration.edge_peer.edge_peer_support import Edge, wait_until
from tests.integration.health.conftest import ClientFactory, EdgeFactory, HealthFactory
from tests.integration.health.health_support import Watch
from tests.integration.history.history_support import ArchiveHandle
from wakucodec.keccak import keccak256
from wakunode.client import WakuClient

UNHEALTHY = common_pb2.HEALTH_STATUS_UNHEALTHY
MINIMAL = common_pb2.HEALTH_STATUS_MINIMALLY_HEALTHY
HEALTHY = common_pb2.HEALTH_STATUS_HEALTHY
ARCHIVE_SERVICE = "mailmesh.archive.v1.ArchiveService"


def address(edge: Edge) -> str:
    return f"127.0.0.1:{edge.mesh.port}"


def codes(report: health_pb2.HealthReport) -> list[int]:
    return [r.code for r in report.reasons]


@pytest.fixture
async def gateway_grpc() -> AsyncIterator[str]:
    """What the health service sees of a gateway: a gRPC port with only grpc.health.v1, whose whole server
    ("") is SERVING (the gateway registers no gRPC service of its own)."""
    server = grpc.aio.server()
    servicer = grpc_health.aio.HealthServicer()
    grpc_health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await servicer.set("", grpc_health_pb2.HealthCheckResponse.SERVING)
    yield f"127.0.0.1:{port}"
    await server.stop(None)


async def connect(make_client: ClientFactory, *edges: Edge) -> WakuClient:
    client = await make_client()
    for edge in edges:
        await client.connect(edge.enode)
    return client


async def transition(watch: Watch, previous: int, status: int) -> health_pb2.HealthReport:
    """The next WatchHealth message, which must be the status change previous -> status."""
    message = await watch.next()
    assert (message.previous_status, message.report.status, message.status_changed) == (
        previous,
        status,
        True,
    )
    return message.report


async def test_status_follows_real_peers_up_and_down_with_every_transition_in_order(
    archive: ArchiveHandle, make_edge: EdgeFactory, make_health: HealthFactory, make_client: ClientFactory
) -> None:
    a, b = await make_edge("edge-a"), await make_edge("edge-b")
    health = await make_health([address(a), address(b)], [archive.address])
    watch = health.watch()
    first = await watch.next()
    assert first.previous_status == common_pb2.HEALTH_STATUS_UNSPECIFIED and not first.status_changed
    report = first.report
    assert (
        report.status == UNHEALTHY
        and report.peer_count == 0
        and codes(report) == [health_pb2.HEALTH_REASON_CODE_NO_PEERS]
    )
    assert report.connection_status == common_pb2.CONNECTION_STATUS_DISCONNECTED

    # Four distinct peers, one of them connected to both edge peers: 3 on a, 2 on b.
    clients = [await connect(make_client, a) for _ in range(2)]
    clients.append(await connect(make_client, a, b))
    clients.append(await connect(make_client, b))
    report = await transition(watch, UNHEALTHY, MINIMAL)
    assert (
        report.peer_count == 4
        and report.connection_status == common_pb2.CONNECTION_STATUS_PARTIALLY_CONNECTED
    )
    assert [(e.instance, e.peer_count, e.reachable) for e in report.edge_peers] == [
        ("edge-a", 3, True),
        ("edge-b", 2, True),
    ]
    assert report.edge_peers[0].node_id == keccak256(a.pubkey)
    assert dict(report.edge_peers[0].peers_by_capability) == {"waku/1": 3}
    assert codes(report) == [health_pb2.HEALTH_REASON_CODE_BELOW_HEALTHY_PEERS]

    clients += [await connect(make_client, b) for _ in range(2)]
    report = await transition(watch, MINIMAL, HEALTHY)
    assert report.peer_count == 6 and report.connection_status == common_pb2.CONNECTION_STATUS_CONNECTED
    assert codes(report) == [] and report.evaluated_status == HEALTHY

    for client in clients[4:]:
        await client.stop()
    report = await transition(watch, HEALTHY, MINIMAL)
    assert report.peer_count in (4, 5)  # the second of the two may not be gone yet

    for client in clients[:4]:
        await client.stop()
    await transition(watch, MINIMAL, UNHEALTHY)
    assert (
        health.metric("mailmesh_health_transitions_total", {"from": "Healthy", "to": "MinimallyHealthy"}) == 1
    )
    assert (
        health.metric("mailmesh_health_transitions_total", {"from": "Unhealthy", "to": "MinimallyHealthy"})
        == 1
    )
    watch.cancel()


async def test_get_health_reports_thresholds_services_and_the_mesh_own_edge_peers_are_not_counted(
    archive: ArchiveHandle,
    make_edge: EdgeFactory,
    make_health: HealthFactory,
    make_client: ClientFactory,
    gateway_grpc: str,
) -> None:
    a, b = await make_edge("edge-a"), await make_edge("edge-b")
    # The two edge peers are connected to each other as well as to one outside peer.
    await a.stub.AddPeer(edgepeer_pb2.AddPeerRequest(enode=b.enode, static_peer=True))
    await wait_until(lambda: len(a.edge.peers()) == 1 and len(b.edge.peers()) == 1, what="edge-a <-> edge-b")
    health = await make_health(
        [address(a), address(b)],
        [archive.address],
        HEALTH_MINIMALLY_HEALTHY_PEERS="1",
        HEALTH_HEALTHY_PEERS="2",
        HEALTH_GATEWAY_ADDR=gateway_grpc,
    )
    watch = health.watch(health_pb2.WATCH_MODE_ANY)
    assert (await watch.next()).report.status == UNHEALTHY
    await connect(make_client, a)
    report = (await watch.until(lambda r: r.status == MINIMAL)).report
    assert report.peer_count == 1  # edge-b, connected to edge-a, is not an outside peer
    got = await health.report()
    assert got.status == MINIMAL and got.peer_count == 1
    assert got.thresholds.minimally_healthy_peers == 1 and got.thresholds.healthy_peers == 2
    assert got.thresholds.hold.ToMilliseconds() == 300 and got.thresholds.loss_hold.ToMilliseconds() == 0
    assert got.evaluated_at.ToSeconds() >= got.status_since.ToSeconds() > 0
    services = [(s.service, s.target, s.grpc_service, s.status, s.affects_status) for s in got.services]
    assert services == [
        ("archive", archive.address, ARCHIVE_SERVICE, health_pb2.SERVING_STATUS_SERVING, True),
        (
            "edge-peer",
            address(a),
            "mailmesh.edgepeer.v1.EdgePeerService",
            health_pb2.SERVING_STATUS_SERVING,
            False,
        ),
        (
            "edge-peer",
            address(b),
            "mailmesh.edgepeer.v1.EdgePeerService",
            health_pb2.SERVING_STATUS_SERVING,
            False,
        ),
        ("gateway", gateway_grpc, "", health_pb2.SERVING_STATUS_SERVING, False),
    ]
    watch.cancel()


async def test_archive_stopped_makes_the_node_unhealthy_with_archive_unavailable(
    archive: ArchiveHandle, make_edge: EdgeFactory, make_health: HealthFactory, make_client: ClientFactory
) -> None:
    a = await make_edge("edge-a")
    health = await make_health(
        [address(a)], [archive.address], HEALTH_MINIMALLY_HEALTHY_PEERS="1", HEALTH_HEALTHY_PEERS="1"
    )
    watch = health.watch()
    assert (await watch.next()).report.status == UNHEALTHY
    await connect(make_client, a)
    await transition(watch, UNHEALTHY, HEALTHY)
    await archive.stop()
    report = await transition(watch, HEALTHY, UNHEALTHY)
    assert codes(report) == [health_pb2.HEALTH_REASON_CODE_ARCHIVE_UNAVAILABLE]
    assert report.reasons[0].detail.startswith(f"archive {archive.address}: unreachable")
    assert report.peer_count == 1 and report.evaluated_status == UNHEALTHY
    (archive_health,) = [s for s in report.services if s.service == "archive"]
    assert archive_health.status == health_pb2.SERVING_STATUS_UNREACHABLE and archive_health.error
    assert health.metric("mailmesh_health_status", {"status": "Unhealthy"}) == 1
    assert (
        health.metric("mailmesh_health_service_serving", {"service": "archive", "target": archive.address})
        == 0
    )
    watch.cancel()


async def test_archive_not_serving_then_serving_again_recovers_after_the_hold(
    archive: ArchiveHandle, make_edge: EdgeFactory, make_health: HealthFactory, make_client: ClientFactory
) -> None:
    a = await make_edge("edge-a")
    health = await make_health(
        [address(a)],
        [archive.address],
        HEALTH_MINIMALLY_HEALTHY_PEERS="1",
        HEALTH_HEALTHY_PEERS="1",
        HEALTH_WATCH_MIN_INTERVAL_SECONDS="0",
    )
    await connect(make_client, a)
    watch = health.watch(health_pb2.WATCH_MODE_ANY)
    await watch.until(lambda r: r.status == HEALTHY)
    await archive.mesh.set_serving(ARCHIVE_SERVICE, False)
    message = await watch.until(lambda r: r.status != HEALTHY)
    assert message.status_changed and message.report.status == UNHEALTHY
    assert codes(message.report) == [health_pb2.HEALTH_REASON_CODE_ARCHIVE_UNAVAILABLE]
    assert message.report.reasons[0].detail == f"archive {archive.address}: NOT_SERVING"
    await archive.mesh.set_serving(ARCHIVE_SERVICE, True)
    # The first evaluation that sees the archive back is held: evaluated Healthy, reported Unhealthy.
    held = await watch.until(lambda r: r.evaluated_status == HEALTHY)
    assert (
        held.report.status == UNHEALTHY and held.report.HasField("pending_since") and not held.status_changed
    )
    assert held.report.connection_status == common_pb2.CONNECTION_STATUS_DISCONNECTED
    recovered = await watch.until(lambda r: r.status == HEALTHY)
    assert recovered.status_changed and recovered.previous_status == UNHEALTHY
    since = recovered.report.status_since.ToNanoseconds() - held.report.pending_since.ToNanoseconds()
    assert since >= 300_000_000  # HOLD_S: the status followed only once the change had held that long
    watch.cancel()


async def test_an_unreachable_edge_peer_counts_zero_is_reported_and_counts_again_when_back(
    archive: ArchiveHandle, make_edge: EdgeFactory, make_health: HealthFactory, make_client: ClientFactory
) -> None:
    a, b = await make_edge("edge-a"), await make_edge("edge-b")
    health = await make_health(
        [address(a), address(b)],
        [archive.address],
        HEALTH_MINIMALLY_HEALTHY_PEERS="1",
        HEALTH_HEALTHY_PEERS="3",
    )
    await connect(make_client, a)
    await connect(make_client, b)
    await connect(make_client, b)
    watch = health.watch()
    await watch.until(lambda r: r.status == HEALTHY)
    await b.mesh.stop(grace=1.0)
    report = await transition(watch, HEALTHY, MINIMAL)
    assert report.peer_count == 1
    assert [(e.target, e.reachable, e.peer_count) for e in report.edge_peers] == [
        (address(a), True, 1),
        (address(b), False, 0),
    ]
    assert report.edge_peers[1].error
    assert health_pb2.HEALTH_REASON_CODE_EDGE_PEER_UNREACHABLE in codes(report)
    assert health.metric("mailmesh_health_edge_peers_reachable") == 1
    # An edge peer back on the same address is queried again (the channel reconnects) and its peers count.
    again = await make_edge("edge-b-again", EDGE_GRPC_PORT=str(b.mesh.port))
    await connect(make_client, again)
    await connect(make_client, again)
    report = await transition(watch, MINIMAL, HEALTHY)
    assert [(e.instance, e.reachable, e.peer_count) for e in report.edge_peers] == [
        ("edge-a", True, 1),
        ("edge-b-again", True, 2),
    ]
    assert health_pb2.HEALTH_REASON_CODE_EDGE_PEER_UNREACHABLE not in codes(report)
    watch.cancel()


async def test_an_unknown_watch_mode_is_invalid_argument(
    archive: ArchiveHandle, make_edge: EdgeFactory, make_health: HealthFactory
) -> None:
    health = await make_health([address(await make_edge("edge-a"))], [archive.address])
    watch = health.watch(mode=7)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await watch.next()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "watch mode 7" in (
        err.value.details() or ""
    )


async def test_graceful_shutdown_ends_open_watch_streams_with_unavailable(
    archive: ArchiveHandle, make_edge: EdgeFactory, make_health: HealthFactory
) -> None:
    health = await make_health([address(await make_edge("edge-a"))], [archive.address])
    watch = health.watch()
    await watch.next()
    # A grace far beyond the test's timeout: the stop finishes only because the streams end on their own.
    await health.mesh.stop(grace=600)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await watch.next()
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert (
        health.metric(
            "grpc_server_handled_total",
            {
                "grpc_type": "server_stream",
                "grpc_service": "mailmesh.health.v1.HealthService",
                "grpc_method": "WatchHealth",
                "grpc_code": "Unavailable",
            },
        )
        == 1
    )
