"""assess(): distinct peer counting, the levels and their reasons, the WAKU-API names."""

from __future__ import annotations

import pytest

from services.health.logic import (
    MAX_DETAIL_BYTES,
    ConnectionStatus,
    HealthStatus,
    Reason,
    ReasonCode,
    ServingStatus,
    Thresholds,
    assess,
    connection_status,
    status_name,
)
from tests.unit.health.health_fakes import archive, edge, service, unreachable_edge

T = Thresholds()


def codes(reasons: tuple[Reason, ...]) -> list[ReasonCode]:
    return [r.code for r in reasons]


@pytest.mark.parametrize(
    ("count", "level", "reason"),
    [
        (0, HealthStatus.UNHEALTHY, ReasonCode.NO_PEERS),
        (1, HealthStatus.UNHEALTHY, ReasonCode.BELOW_MINIMAL_PEERS),
        (3, HealthStatus.UNHEALTHY, ReasonCode.BELOW_MINIMAL_PEERS),
        (4, HealthStatus.MINIMALLY_HEALTHY, ReasonCode.BELOW_HEALTHY_PEERS),
        (5, HealthStatus.MINIMALLY_HEALTHY, ReasonCode.BELOW_HEALTHY_PEERS),
        (6, HealthStatus.HEALTHY, None),
        (40, HealthStatus.HEALTHY, None),
    ],
)
def test_levels_follow_the_default_thresholds(
    count: int, level: HealthStatus, reason: ReasonCode | None
) -> None:
    a = assess((edge("e:1", range(count)),), (archive(),), T)
    assert a.level is level and a.peer_count == count
    assert codes(a.reasons) == ([] if reason is None else [reason])
    assert a.loss is (count == 0)


def test_reason_details_say_how_many_peers_are_needed() -> None:
    assert assess((edge("e:1", range(3)),), (archive(),), T).reasons[0].detail == (
        "3 peers, 4 needed for MinimallyHealthy"
    )
    assert (
        assess((edge("e:1", range(5)),), (archive(),), T).reasons[0].detail == "5 peers, 6 needed for Healthy"
    )


def test_configured_thresholds_apply() -> None:
    custom = Thresholds(minimally_healthy_peers=1, healthy_peers=2)
    assert assess((edge("e:1", [1]),), (archive(),), custom).level is HealthStatus.MINIMALLY_HEALTHY
    assert assess((edge("e:1", [1, 2]),), (archive(),), custom).level is HealthStatus.HEALTHY


def test_a_peer_on_two_edge_peers_counts_once() -> None:
    a = assess((edge("e:1", [1, 2, 3, 4]), edge("e:2", [3, 4, 5, 6])), (archive(),), T)
    assert a.peer_count == 6 and a.level is HealthStatus.HEALTHY
    assert [e.peer_count for e in a.edge_peers] == [4, 4]


def test_the_mesh_own_edge_peers_connected_to_each_other_are_not_counted() -> None:
    # e:1 (node 100) and e:2 (node 200) are connected to each other and to peers 1..4.
    first = edge("e:1", [1, 2, 3, 4, 200], own=100)
    second = edge("e:2", [1, 2, 3, 4, 100], own=200)
    a = assess((first, second), (archive(),), T)
    assert a.peer_count == 4 and a.level is HealthStatus.MINIMALLY_HEALTHY
    assert [e.peer_count for e in a.edge_peers] == [4, 4]


def test_an_unreachable_edge_peer_counts_zero_and_says_why() -> None:
    a = assess((edge("e:1", range(4)), unreachable_edge("e:2", "deadline exceeded")), (archive(),), T)
    assert a.peer_count == 4 and a.level is HealthStatus.MINIMALLY_HEALTHY
    assert codes(a.reasons) == [ReasonCode.BELOW_HEALTHY_PEERS, ReasonCode.EDGE_PEER_UNREACHABLE]
    assert a.reasons[1].detail == "edge peer e:2: deadline exceeded"
    assert a.edge_peers[1].peer_count == 0 and not a.edge_peers[1].observation.reachable


def test_no_reachable_edge_peer_is_a_loss_with_its_counts_in_the_detail() -> None:
    a = assess((unreachable_edge("e:1"), unreachable_edge("e:2")), (archive(),), T)
    assert a.level is HealthStatus.UNHEALTHY and a.loss
    assert codes(a.reasons) == [
        ReasonCode.NO_PEERS,
        ReasonCode.EDGE_PEER_UNREACHABLE,
        ReasonCode.EDGE_PEER_UNREACHABLE,
    ]
    assert a.reasons[0].detail == "no Waku peer on any edge peer (0 of 2 edge peers reachable)"


@pytest.mark.parametrize(
    "status",
    [
        ServingStatus.NOT_SERVING,
        ServingStatus.UNREACHABLE,
        ServingStatus.SERVICE_UNKNOWN,
        ServingStatus.UNKNOWN,
    ],
)
def test_archive_not_serving_makes_the_node_unhealthy_whatever_the_peers(status: ServingStatus) -> None:
    a = assess((edge("e:1", range(8)),), (archive(status, error="boom"),), T)
    assert a.level is HealthStatus.UNHEALTHY and a.loss and a.peer_count == 8
    assert codes(a.reasons) == [ReasonCode.ARCHIVE_UNAVAILABLE]
    assert a.reasons[0].detail.startswith("archive a:1: ") and a.reasons[0].detail.endswith(": boom")


def test_one_archive_replica_down_is_information_while_another_serves() -> None:
    replicas = (archive(ServingStatus.UNREACHABLE, "a:1", "refused"), archive(ServingStatus.SERVING, "a:2"))
    a = assess((edge("e:1", range(6)),), replicas, T)
    assert a.level is HealthStatus.HEALTHY and not a.loss
    assert codes(a.reasons) == [ReasonCode.SERVICE_NOT_SERVING]
    assert a.reasons[0].detail == "archive a:1: unreachable: refused"


def test_other_services_never_lower_the_level() -> None:
    others = (service("ingest", ServingStatus.NOT_SERVING), service("send", ServingStatus.UNREACHABLE, "s:2"))
    a = assess((edge("e:1", range(6)),), (archive(), *others), T)
    assert a.level is HealthStatus.HEALTHY
    assert codes(a.reasons) == [ReasonCode.SERVICE_NOT_SERVING, ReasonCode.SERVICE_NOT_SERVING]
    assert [r.detail for r in a.reasons] == ["ingest s:1: NOT_SERVING", "send s:2: unreachable"]


def test_peers_by_capability_per_edge_peer() -> None:
    first = edge("e:1", [1, 2], capability="waku/1")
    second = edge("e:2", [3], capability="shh/6")
    a = assess((first, second), (archive(),), T)
    assert [e.peers_by_capability for e in a.edge_peers] == [(("waku/1", 2),), (("shh/6", 1),)]


def test_a_long_detail_is_cut_to_the_proto_limit_on_a_character_boundary() -> None:
    reason = Reason.of(ReasonCode.EDGE_PEER_UNREACHABLE, "é" * 300)
    assert len(reason.detail.encode()) <= MAX_DETAIL_BYTES and reason.detail.endswith("...")
    assert Reason.of(ReasonCode.NO_PEERS, "short").detail == "short"


@pytest.mark.parametrize(
    ("status", "connection", "name"),
    [
        (HealthStatus.UNHEALTHY, ConnectionStatus.DISCONNECTED, "Unhealthy"),
        (HealthStatus.MINIMALLY_HEALTHY, ConnectionStatus.PARTIALLY_CONNECTED, "MinimallyHealthy"),
        (HealthStatus.HEALTHY, ConnectionStatus.CONNECTED, "Healthy"),
    ],
)
def test_waku_api_names_map_one_to_one(status: HealthStatus, connection: ConnectionStatus, name: str) -> None:
    assert connection_status(status) is connection and status_name(status) == name
    assert int(connection) == int(status)  # the proto enums share numbers, so either converts by value


@pytest.mark.parametrize(
    "kwargs",
    [
        {"minimally_healthy_peers": 0},
        {"minimally_healthy_peers": 7, "healthy_peers": 6},
        {"hold_s": 1.0, "loss_hold_s": 2.0},
        {"loss_hold_s": -1.0},
    ],
)
def test_inconsistent_thresholds_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Thresholds(**kwargs)  # type: ignore[arg-type]


def test_an_edge_peer_that_did_not_answer_is_one_reason_not_two() -> None:
    checks = (
        archive(),
        service("edge-peer", ServingStatus.UNREACHABLE, "e:2"),
        service("edge-peer", ServingStatus.NOT_SERVING, "e:1"),
    )
    a = assess((edge("e:1", range(6)), unreachable_edge("e:2")), checks, T)
    assert codes(a.reasons) == [ReasonCode.EDGE_PEER_UNREACHABLE, ReasonCode.SERVICE_NOT_SERVING]
    assert a.reasons[1].detail == "edge-peer e:1: NOT_SERVING"  # answers ListPeers but is shutting down
