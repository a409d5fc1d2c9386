"""Planning a mesh (ports, addresses, order, replicas, state files), free ports, and log-line parsing."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from meshharness import (
    CATALOG,
    Allow,
    FixedPorts,
    FreePorts,
    LogCapture,
    LogLine,
    ServiceExited,
    free_ports,
    plan,
)
from meshharness.ports import PORT_RANGE

ALL = ["edge_peer", "history", "ingest", "archive"]


def test_fixed_layout_is_make_runs_ports_in_dependency_order(tmp_path: Path) -> None:
    specs = plan(ALL, ports=FixedPorts(), state_dir=tmp_path, inherit_env=True)
    assert [s.name for s in specs] == ["archive", "ingest", "history", "edge_peer"]
    by = {s.name: s for s in specs}
    assert {name: s.grpc_port for name, s in by.items()} == {
        "edge_peer": 50051,
        "ingest": 50052,
        "archive": 50053,
        "history": 50054,
    }
    assert by["archive"].env["ARCHIVE_METRICS_PORT"] == "9153"
    assert by["ingest"].env["INGEST_ARCHIVE_ADDR"] == "127.0.0.1:50053"
    assert by["history"].env["HISTORY_ARCHIVE_ADDR"] == "127.0.0.1:50053"
    assert by["edge_peer"].env["EDGE_INGEST_ADDR"] == "127.0.0.1:50052"
    assert by["edge_peer"].env["EDGE_HISTORY_ADDR"] == "127.0.0.1:50054"
    assert by["edge_peer"].env["EDGE_LISTEN_PORT"] == "30303"
    assert "EDGE_LISTEN_HOST" not in by["edge_peer"].env  # make run keeps the services' default host
    assert by["archive"].env["ARCHIVE_SQLITE_PATH"] == str(tmp_path / "archive.sqlite3")
    assert by["history"].env["HISTORY_CURSOR_SECRET_FILE"] == str(tmp_path / "cursor.secret")
    assert all(s.inherit_env and s.health == CATALOG[s.name].health for s in specs)


def test_fixed_layout_bases_and_extra_ports_are_configurable() -> None:
    specs = plan(["archive", "edge_peer"], ports=FixedPorts(40000, 8000, {"EDGE_LISTEN_PORT": 40009}))
    by = {s.name: s for s in specs}
    assert by["archive"].grpc_port == 40003 and by["edge_peer"].env["EDGE_METRICS_PORT"] == "8001"
    assert by["edge_peer"].env["EDGE_LISTEN_PORT"] == "40009"
    assert "EDGE_INGEST_ADDR" not in by["edge_peer"].env  # not in this mesh: the caller's to set


def test_health_gets_the_addresses_of_services_it_observes_which_start_after_it() -> None:
    """send, subscription and the gateway need health, and health checks them: it learns their addresses
    anyway."""
    mesh = [*ALL, "health", "send", "subscription", "gateway"]
    specs = plan(mesh, ports=FixedPorts(40000, 8000))
    order = [s.name for s in specs]
    assert order.index("health") < order.index("send") < order.index("subscription") < order.index("gateway")
    by = {s.name: s for s in specs}
    assert by["health"].env["HEALTH_SEND_ADDR"] == "127.0.0.1:40005"
    assert by["health"].env["HEALTH_SUBSCRIPTION_ADDR"] == "127.0.0.1:40006"
    assert by["health"].env["HEALTH_GATEWAY_ADDR"] == "127.0.0.1:40008"
    assert by["subscription"].env["SUBSCRIPTION_SEND_ADDR"] == "127.0.0.1:40005"
    overridden = plan(mesh, ports=FixedPorts(40000, 8000), env={"health": {"HEALTH_SEND_ADDR": ""}})
    assert next(s for s in overridden if s.name == "health").env["HEALTH_SEND_ADDR"] == ""
    alone = plan(["archive", "health"], ports=FixedPorts(40000, 8000))
    assert "HEALTH_SEND_ADDR" not in alone[-1].env  # not in this mesh: the service's default applies


def test_free_ports_are_distinct_loopback_and_replicas_get_their_own(tmp_path: Path) -> None:
    specs = plan(
        ALL,
        ports=FreePorts(),
        state_dir=tmp_path,
        replicas={"edge_peer": 2},
        env={"edge_peer": {"EDGE_MAX_PEERS": "3"}, "archive": {"ARCHIVE_BACKEND": "sqlite"}},
    )
    assert [s.name for s in specs] == ["archive", "ingest", "history", "edge_peer", "edge_peer-1"]
    ports = [int(v) for s in specs for k, v in s.env.items() if k.endswith("_PORT")]
    assert len(ports) == len(set(ports)) == 2 * 5 + 2  # gRPC + metrics each, devp2p for both edges
    edges = specs[3:]
    assert [e.env["EDGE_INSTANCE"] for e in edges] == ["edge_peer", "edge_peer-1"]
    assert [e.env["EDGE_NODE_KEY_FILE"] for e in edges] == [
        str(tmp_path / "edge-peer.nodekey"),
        str(tmp_path / "edge_peer-1.edge-peer.nodekey"),
    ]
    assert all(e.env["EDGE_LISTEN_HOST"] == e.env["EDGE_GRPC_HOST"] == "127.0.0.1" for e in edges)
    assert all(e.env["EDGE_MAX_PEERS"] == "3" and not e.inherit_env for e in edges)
    assert specs[0].env["ARCHIVE_BACKEND"] == "sqlite"


def test_clients_get_every_replica_and_replicas_share_what_they_must(tmp_path: Path) -> None:
    mesh = ["archive", "ingest", "history", "edge_peer", "health", "send", "subscription"]
    counts = {"archive": 2, "ingest": 2, "history": 2, "health": 2, "send": 2, "subscription": 2}
    specs = plan(mesh, ports=FreePorts(metrics=False), state_dir=tmp_path, replicas=counts)
    by = {s.name: s for s in specs}
    archives = f"{by['archive'].address},{by['archive-1'].address}"
    assert by["ingest"].env["INGEST_ARCHIVE_ADDR"] == by["ingest-1"].env["INGEST_ARCHIVE_ADDR"] == archives
    assert by["edge_peer"].env["EDGE_HISTORY_ADDR"] == f"{by['history'].address},{by['history-1'].address}"
    assert by["health"].env["HEALTH_SEND_ADDR"] == f"{by['send'].address},{by['send-1'].address}"  # observed
    # One cursor secret (a cursor from one replica is valid on the other), one messaging store for the
    # send and subscription replicas; each archive its own SQLite file (one writer per file).
    secret = {by[n].env["HISTORY_CURSOR_SECRET_FILE"] for n in ("history", "history-1")}
    assert secret == {str(tmp_path / "cursor.secret")}
    stores = {by[n].env["MSGSTORE_SQLITE_PATH"] for n in ("send", "send-1", "subscription", "subscription-1")}
    assert stores == {str(tmp_path / "messaging.sqlite3")}
    assert by["archive"].env["ARCHIVE_SQLITE_PATH"] != by["archive-1"].env["ARCHIVE_SQLITE_PATH"]


def test_route_puts_something_in_front_of_each_dependency() -> None:
    seen: list[tuple[str, str, str]] = []

    def via_proxy(client: str, dependency: str, address: str) -> str:
        seen.append((client, dependency, address))
        return f"127.0.0.9:{address.rpartition(':')[2]}"

    mesh = ["archive", "ingest", "history"]
    specs = plan(mesh, ports=FreePorts(), replicas={"archive": 2}, route=via_proxy)
    by = {s.name: s for s in specs}
    archive_ports = [by[n].grpc_port for n in ("archive", "archive-1")]
    assert by["ingest"].env["INGEST_ARCHIVE_ADDR"] == ",".join(f"127.0.0.9:{p}" for p in archive_ports)
    assert {(c, d) for c, d, _ in seen} == {("ingest", "archive"), ("history", "archive")}
    assert len(seen) == 4  # two clients, two replicas each


def test_replicas_need_free_ports_and_names_must_be_known() -> None:
    with pytest.raises(ValueError, match="replicas"):
        plan(["edge_peer"], ports=FixedPorts(), replicas={"edge_peer": 2})
    with pytest.raises(KeyError, match="known"):
        plan(["gateway-typo"], ports=FreePorts())


def test_free_ports_can_be_bound() -> None:
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert all(PORT_RANGE[0] <= p <= PORT_RANGE[1] for p in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_log_lines_and_noise() -> None:
    info = LogLine.parse('{"level": "INFO", "msg": "serving", "logger": "meshcore.server"}')
    warning = LogLine.parse('{"level": "WARNING", "msg": "slow store", "logger": "archive"}')
    raw = LogLine.parse("Traceback (most recent call last):")
    broken = LogLine.parse('{"level": "INFO", "msg": "cut')
    assert (info.level, info.msg, info.logger) == ("INFO", "serving", "meshcore.server")
    assert raw.record is None and raw.msg == raw.text and broken.record is None
    capture = LogCapture("svc")
    for line in (info, warning, raw, broken, LogLine.parse("")):
        capture.add(line.text)
    assert capture.unexpected() == [warning, raw, broken]
    assert capture.unexpected([Allow("slow", logger="archive"), Allow("^Traceback"), Allow("cut")]) == []
    assert capture.unexpected([Allow("slow", logger="other")])[0] == warning


def test_wait_for_wakes_on_a_new_line_and_on_close() -> None:
    capture = LogCapture("svc")
    writer = threading.Thread(target=lambda: capture.add('{"level": "INFO", "msg": "ready"}'))
    writer.start()
    assert capture.wait_for(lambda line: line.msg == "ready", 30).level == "INFO"
    writer.join()
    capture.close(3)
    with pytest.raises(ServiceExited) as info:
        capture.wait_for(lambda line: line.msg == "later", 30)
    assert info.value.returncode == 3
    assert capture.wait_for(lambda line: line.msg == "ready", 0).msg == "ready"  # already seen lines count
