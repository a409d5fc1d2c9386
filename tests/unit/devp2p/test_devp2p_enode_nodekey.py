"""enode URL parsing/formatting, node key files, the inbound throttle and config validation."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from devp2p.config import ServerConfig, SessionConfig
from devp2p.enode import Enode, format_enode, parse_enode
from devp2p.errors import InvalidEnode
from devp2p.nodekey import NodeKeyError, load_node_key, load_or_create_node_key, save_node_key
from devp2p.stats import InboundThrottle, ServerStats, is_lan
from tests.unit.devp2p.vectors import STATIC_KEY_A
from wakucodec import secp
from wakucodec.keccak import keccak256

PUB = secp.public_key(STATIC_KEY_A)
HEX = PUB.hex()


@pytest.mark.parametrize(
    ("url", "host", "port", "discport"),
    [
        (f"enode://{HEX}@10.3.58.6:30303", "10.3.58.6", 30303, None),
        (f"enode://{HEX}@10.3.58.6:30303?discport=30301", "10.3.58.6", 30303, 30301),
        (f"enode://{HEX}@[::1]:30303", "::1", 30303, None),
        (f"enode://{HEX}@mailserver-0.mailmesh.svc:443", "mailserver-0.mailmesh.svc", 443, None),
        (f"  enode://{HEX.upper()}@127.0.0.1:1  ", "127.0.0.1", 1, None),
    ],
)
def test_parse_enode(url: str, host: str, port: int, discport: int | None) -> None:
    node = parse_enode(url)
    assert node == Enode(PUB, host, port, discport)
    assert node.id_hash == keccak256(PUB)
    assert parse_enode(str(node)) == node


def test_format_enode() -> None:
    assert format_enode(PUB, "1.2.3.4", 30303) == f"enode://{HEX}@1.2.3.4:30303"
    assert format_enode(PUB, "::1", 5, discport=6) == f"enode://{HEX}@[::1]:5?discport=6"
    assert format_enode(PUB, "h", 5, discport=5) == f"enode://{HEX}@h:5"
    with pytest.raises(ValueError):
        format_enode(PUB[:63], "h", 1)


@pytest.mark.parametrize(
    "url",
    [
        f"enr://{HEX}@1.2.3.4:30303",
        f"enode://{HEX}",  # incomplete: nothing to dial
        f"enode://{HEX[:-2]}@1.2.3.4:30303",  # short key
        f"enode://{'00' * 64}@1.2.3.4:30303",  # not on the curve
        f"enode://{'zz' * 64}@1.2.3.4:30303",  # not hex
        f"enode://{HEX}@1.2.3.4",  # no port
        f"enode://{HEX}@1.2.3.4:0",
        f"enode://{HEX}@1.2.3.4:70000",
        f"enode://{HEX}@:30303",
        f"enode://{HEX}@1.2.3.4:30303?discport=x",
        f"enode://{HEX}:pw@1.2.3.4:30303",
    ],
)
def test_invalid_enodes(url: str) -> None:
    with pytest.raises(InvalidEnode):
        parse_enode(url)
    with pytest.raises(ValueError):  # InvalidEnode is also a ValueError
        parse_enode(url)


def test_node_key_create_load_and_permissions(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "nodekey"
    key = load_or_create_node_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == key.hex()
    assert load_or_create_node_key(path) == key
    assert load_node_key(path) == key
    save_node_key(path, STATIC_KEY_A)  # atomic replace keeps 0600
    assert load_node_key(path) == STATIC_KEY_A
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["nodekey"]


def test_node_key_tolerates_whitespace_and_0x(tmp_path: Path) -> None:
    path = tmp_path / "nodekey"
    path.write_text("0x" + STATIC_KEY_A.hex() + "\n")
    os.chmod(path, 0o600)
    assert load_node_key(path) == STATIC_KEY_A


@pytest.mark.parametrize("content", ["", "abc", "00" * 32, "ff" * 32, "zz" * 32, "11" * 33])
def test_bad_node_key_files(tmp_path: Path, content: str) -> None:
    path = tmp_path / "nodekey"
    path.write_text(content)
    with pytest.raises(NodeKeyError):
        load_node_key(path)


def test_missing_node_key(tmp_path: Path) -> None:
    with pytest.raises(NodeKeyError):
        load_node_key(tmp_path / "absent")


def test_inbound_throttle() -> None:
    now = [100.0]
    throttle = InboundThrottle(30.0, exempt_lan=False, clock=lambda: now[0])
    assert throttle.allow("8.8.8.8")
    assert not throttle.allow("8.8.8.8")
    assert throttle.allow("1.1.1.1")
    now[0] += 29.9
    assert not throttle.allow("8.8.8.8")
    now[0] += 0.2
    assert throttle.allow("8.8.8.8")
    assert len(throttle) == 1  # 1.1.1.1 expired and was pruned


def test_throttle_lan_exemption_and_disable() -> None:
    exempt = InboundThrottle(30.0)
    assert all(exempt.allow("127.0.0.1") for _ in range(3))
    assert all(exempt.allow("10.1.2.3") for _ in range(3))
    assert exempt.allow("8.8.8.8") and not exempt.allow("8.8.8.8")
    assert InboundThrottle(0).allow("8.8.8.8") and InboundThrottle(0).allow("8.8.8.8")
    assert is_lan("::1") and is_lan("fe80::1%eth0") and is_lan("::ffff:192.168.1.1") and not is_lan("1.2.3.4")
    assert not is_lan("not-an-ip")


def test_stats_snapshot() -> None:
    stats = ServerStats()
    stats.rejected["throttled"] += 2
    assert stats.snapshot()["rejected"] == {"throttled": 2}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"handshake_timeout": 0},
        {"max_frame_size": 2**24},
        {"max_message_size": 0},
        {"protocol_queue_size": 0},
    ],
)
def test_session_config_validation(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SessionConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs", [{"port": 70000}, {"max_pending_peers": 0}, {"inbound_throttle": -1}, {"static_redial_min": 0}]
)
def test_server_config_validation(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ServerConfig(**kwargs)  # type: ignore[arg-type]
