"""Two of our nodes over loopback sockets handshake on every capability combination (§3.3, §5.6)."""

from __future__ import annotations

import asyncio

import pytest

from devp2p.errors import DisconnectReason, PeerDisconnected
from devp2p.server import Server
from tests.integration.wakunode.support import FAST, SERVER, Running, link, running_node, wait_until
from tests.unit.devp2p.support import Recorder
from wakucodec import secp
from wakunode.options import StatusOptions
from wakunode.peerstate import Flavor
from wakunode.protocol import encode_status


@pytest.mark.parametrize(
    ("caps_a", "caps_b", "negotiated"),
    [
        (("waku/1",), ("waku/1",), {"waku/1"}),
        (("waku/0",), ("waku/0",), {"waku/0"}),
        (("shh/6",), ("shh/6",), {"shh/6"}),
        (("waku/1", "waku/0"), ("waku/1",), {"waku/1"}),
        (("waku/1", "waku/0"), ("waku/0",), {"waku/0"}),
        (("waku/1", "waku/0"), ("waku/1", "waku/0"), {"waku/1"}),
        (("shh/6", "waku/1"), ("waku/1", "shh/6"), {"shh/6", "waku/1"}),
        (("waku/1", "waku/0", "shh/6"), ("waku/1", "waku/0", "shh/6"), {"shh/6", "waku/1"}),
        (("waku/1",), ("waku/1", "shh/6"), {"waku/1"}),
    ],
)
async def test_capability_combinations(
    caps_a: tuple[str, ...], caps_b: tuple[str, ...], negotiated: set[str]
) -> None:
    async with (
        running_node(FAST, capabilities=caps_a, pow_requirement=0.25) as a,
        running_node(FAST, capabilities=caps_b, pow_requirement=0.5, light_node=True) as b,
    ):
        await link(a, b)
        await _wait_sessions(a, b, len(negotiated))
        seen_by_a = {p.capability for p in a.node.peers()}
        seen_by_b = {p.capability for p in b.node.peers()}
        assert seen_by_a == seen_by_b == negotiated
        assert all(p.pow_requirement == 0.5 and p.light_node for p in a.node.peers())
        assert all(p.pow_requirement == 0.25 and not p.light_node for p in b.node.peers())
        assert all(p.bloom == b"\xff" * 64 and p.snappy for p in a.node.peers())
        [peer] = a.server.peers
        assert {str(cap) for cap in peer.capabilities.capabilities} == negotiated


async def _wait_sessions(a: Running, b: Running, count: int) -> None:
    await wait_until(
        lambda: len(a.node.peers()) == count and len(b.node.peers()) == count,
        what=f"{count} sessions each side",
    )


async def test_no_shared_capability_is_a_useless_peer() -> None:
    async with (
        running_node(FAST, capabilities=("waku/1",)) as a,
        running_node(FAST, capabilities=("shh/6",)) as b,
    ):
        with pytest.raises(PeerDisconnected) as info:
            await a.server.dial(b.enode)
        assert info.value.reason == DisconnectReason.USELESS_PEER
        assert a.node.peers() == [] and b.node.peers() == []


async def test_connect_prefers_waku1_even_when_shh6_handshakes_first() -> None:
    shh = Recorder(name="shh", version=6, length=128)
    waku = Recorder(name="waku", version=1, length=128)
    remote = Server(secp.generate_private_key(), [shh, waku], SERVER)
    async with running_node(FAST, capabilities=("waku/1", "shh/6")) as a, remote:
        ready = asyncio.create_task(a.node.wait_ready(remote.pubkey, 5))
        await a.server.dial(remote.enode)
        await wait_until(lambda: len(remote.peers) == 1, what="the inbound session")
        [peer] = remote.peers
        await peer.send(shh, 0, encode_status(Flavor.SHH6, StatusOptions()))
        await wait_until(lambda: [p.capability for p in a.node.peers()] == ["shh/6"], what="shh/6 ready")
        await peer.send(waku, 0, encode_status(Flavor.WAKU1, StatusOptions()))
        info = await asyncio.wait_for(ready, 5)
        assert info.capability == "waku/1"  # not the shh/6 session that was ready first
        assert a.node.session(remote.pubkey) is not None
