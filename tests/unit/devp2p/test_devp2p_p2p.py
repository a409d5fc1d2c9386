"""Base protocol commands (Hello, Disconnect, Ping, Pong) and capability negotiation
(protocol-notes §5.6, §5.7, §7.4)."""

from __future__ import annotations

import pytest

from devp2p.abc import PeerAPI, SubProtocol
from devp2p.capabilities import CapabilityTable
from devp2p.errors import DisconnectReason, InvalidMessageCode, MalformedMessage, reason_name
from devp2p.hello import Capability, HelloPayload
from devp2p.p2p import Disconnect, Hello, Ping, Pong, loggable
from tests.unit.devp2p.vectors import HELLO_EIP8
from wakucodec import rlp

# --- Hello ------------------------------------------------------------------------------------------------


def test_hello_vector_decodes_and_ignores_extras() -> None:
    hello = Hello.decode(HELLO_EIP8)
    assert hello.version == 55
    assert hello.client_id == "kneth/v0.91/plan9"
    assert hello.capabilities == (Capability("eth", 61), Capability("mork", 22))
    assert hello.listen_port == 9999
    assert hello.node_id == bytes.fromhex(
        "fda1cff674c90c9a197539fe3dfb53086ace64f83ed7c6eabec741f7f381cc80"
        "3e52ab2cd55d5569bce4347107a310dfd5f88a010cd2ffd1005ca406f1842877"
    )
    item = rlp.decode(HELLO_EIP8)
    assert isinstance(item, list) and item[5:] == [[b"foo", b"bar"], b"\x03", b"\x04"]


def test_hello_round_trip() -> None:
    hello = HelloPayload(
        5, "mailmesh/v0.1.0", (Capability("shh", 6), Capability("waku", 1)), 30303, bytes(range(64))
    )
    assert Hello.decode(Hello.encode(hello)) == hello
    assert Hello.code == 0


def test_hello_tolerates_extra_elements_in_a_capability() -> None:
    data = rlp.encode([5, b"x", [[b"waku", 1, b"future"]], 0, bytes(64)])
    assert Hello.decode(data).capabilities == (Capability("waku", 1),)


@pytest.mark.parametrize(
    "item",
    [
        [5, b"x", [], 0],  # too short
        [5, [b"x"], [], 0, bytes(64)],  # list where a string belongs
        [5, b"x", b"caps", 0, bytes(64)],  # string where a list belongs
        [5, b"x", [[b"waku"]], 0, bytes(64)],  # capability without version
        [b"\x00\x05", b"x", [], 0, bytes(64)],  # non-canonical version
        [5, b"x", [], 0, [b"id"]],  # node id as a list
    ],
)
def test_malformed_hello(item: rlp.Encodable) -> None:
    with pytest.raises(MalformedMessage):
        Hello.decode(rlp.encode(item))
    with pytest.raises(MalformedMessage):
        Hello.decode(b"\xc5\x01")


def test_loggable_trims_peer_strings() -> None:
    assert loggable("Geth/v1.9.20") == "Geth/v1.9.20"
    assert loggable("a\x1b[31mred\nline") == "a?[31mred?line"
    long = loggable("x" * 10_000)
    assert len(long) == 128 and long.endswith("…")


# --- Disconnect, Ping, Pong ---------------------------------------------------------------------------------


def test_disconnect_encoding_matches_geth() -> None:
    assert Disconnect.encode(DisconnectReason.REQUESTED) == b"\xc1\x80"
    assert Disconnect.encode(DisconnectReason.SUBPROTOCOL_ERROR) == b"\xc1\x10"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xc1\x04", DisconnectReason.TOO_MANY_PEERS),
        (b"\x04", DisconnectReason.TOO_MANY_PEERS),  # bare reason
        (b"\x80", DisconnectReason.REQUESTED),
        (b"\xc0", DisconnectReason.REQUESTED),  # empty list
        (b"\xc2\x0a\x0b", DisconnectReason.SELF),  # extra elements
        (b"\xff\xff", DisconnectReason.REQUESTED),  # garbage → zero value, like geth
        (b"\xc1\x20", 0x20),  # unknown code kept as an int
    ],
)
def test_disconnect_decoding(data: bytes, reason: int) -> None:
    decoded = Disconnect.decode(data)
    assert decoded == reason
    assert type(decoded) is type(reason)


def test_disconnect_reason_codes_are_the_spec_table() -> None:
    assert {r.name: int(r) for r in DisconnectReason} == {
        "REQUESTED": 0x00,
        "NETWORK_ERROR": 0x01,
        "PROTOCOL_ERROR": 0x02,
        "USELESS_PEER": 0x03,
        "TOO_MANY_PEERS": 0x04,
        "ALREADY_CONNECTED": 0x05,
        "INCOMPATIBLE_VERSION": 0x06,
        "INVALID_IDENTITY": 0x07,
        "QUITTING": 0x08,
        "UNEXPECTED_IDENTITY": 0x09,
        "SELF": 0x0A,
        "READ_TIMEOUT": 0x0B,
        "SUBPROTOCOL_ERROR": 0x10,
    }
    assert reason_name(4) == "too_many_peers" and reason_name(0x33) == "unknown_0x33"


def test_ping_pong() -> None:
    assert (Ping.code, Pong.code) == (2, 3)
    assert Ping.encode(None) == Pong.encode(None) == b"\xc0"
    assert Ping.decode(b"\xc0") is None and Pong.decode(b"anything") is None


# --- capabilities -----------------------------------------------------------------------------------------


class Dummy(SubProtocol):
    def __init__(self, name: str, version: int, length: int = 128) -> None:
        self.name, self.version, self.length = name, version, length

    async def handle(self, peer: PeerAPI, code: int, payload: bytes) -> None:
        pass


WAKU0, WAKU1, SHH6 = Dummy("waku", 0), Dummy("waku", 1), Dummy("shh", 6)


def _offsets(table: CapabilityTable) -> list[tuple[str, int, int]]:
    return [(str(n.capability), n.offset, n.end - 1) for n in table]


def test_waku1_only_offsets() -> None:
    table = CapabilityTable.negotiate([WAKU1], [Capability("waku", 1)])
    assert _offsets(table) == [("waku/1", 0x10, 0x8F)]
    wire = {
        name: table.wire_id("waku", code)
        for name, code in [("status", 0), ("messages", 1), ("batch_ack", 11)]
    }
    assert wire == {"status": 0x10, "messages": 0x11, "batch_ack": 0x1B}
    assert [table.wire_id(WAKU1, code) for code in (12, 22, 125, 126, 127)] == [0x1C, 0x26, 0x8D, 0x8E, 0x8F]
    assert table.resolve(0x8F) == (table.protocols[0], 127)
    with pytest.raises(InvalidMessageCode):
        table.resolve(0x90)


def test_shh_and_waku_offsets() -> None:
    table = CapabilityTable.negotiate([WAKU1, SHH6], [Capability("waku", 1), Capability("shh", 6)])
    assert _offsets(table) == [("shh/6", 0x10, 0x8F), ("waku/1", 0x90, 0x10F)]
    assert table.resolve(0x90)[1] == 0 and table.resolve(0x90)[0].protocol is WAKU1
    assert table.resolve(0x8F)[0].protocol is SHH6
    assert table.wire_id("waku", 127) == 0x10F


def test_highest_shared_version_wins_and_takes_the_slot() -> None:
    remote = [Capability("waku", 1), Capability("waku", 0), Capability("shh", 6)]
    table = CapabilityTable.negotiate([WAKU0, WAKU1, SHH6], remote)
    assert _offsets(table) == [("shh/6", 0x10, 0x8F), ("waku/1", 0x90, 0x10F)]
    only_old = CapabilityTable.negotiate([WAKU0, WAKU1], [Capability("waku", 0)])
    assert _offsets(only_old) == [("waku/0", 0x10, 0x8F)]


def test_unshared_capabilities_are_skipped() -> None:
    remote = [Capability("eth", 63), Capability("les", 2), Capability("waku", 1), Capability("zzz", 1)]
    table = CapabilityTable.negotiate([WAKU1, Dummy("zzz", 2, 4)], remote)
    assert _offsets(table) == [("waku/1", 0x10, 0x8F)]
    assert not CapabilityTable.negotiate([WAKU1], [Capability("eth", 63)])


def test_mixed_lengths_pack_contiguously() -> None:
    small = Dummy("aaa", 1, 3)
    table = CapabilityTable.negotiate([small, WAKU1], [Capability("waku", 1), Capability("aaa", 1)])
    assert _offsets(table) == [("aaa/1", 0x10, 0x12), ("waku/1", 0x13, 0x92)]


def test_base_ids_and_unknown_protocols() -> None:
    table = CapabilityTable.negotiate([WAKU1], [Capability("waku", 1)])
    with pytest.raises(InvalidMessageCode) as info:
        table.resolve(2**40)
    assert info.value.code == 2**40
    with pytest.raises(ValueError, match="not negotiated"):
        table.wire_id("shh", 0)
    with pytest.raises(ValueError, match="not negotiated"):
        table.wire_id(WAKU0, 0)  # same name, other handler
    with pytest.raises(ValueError, match="outside"):
        table.wire_id("waku", 128)
