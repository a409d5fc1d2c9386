"""Two of our nodes over loopback sockets handshake on every capability combination
(protocol-notes §3.3, §5.6)."""

from __future__ import annotations

import asyncio

import pytest

from devp2p.errors import DisconnectReason, PeerDisconnected
from devp2p.server import Server
from tests.integration.wakunode.support import FAST, SERVER, Running, link, running_node, wait_until
from tests.unit.devp2p.support import Recorder
from wakucodec import secp
from wakunode.peerstate import Flavor
from wakunode.protocol import encode_status
from wakunode.status_options import StatusOptions


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


# --- two light nodes (protocol-notes §3.1, §3.4: RestrictConnectionBetweenLightClients) -----------------


@pytest.mark.parametrize("capability", ["waku/1", "waku/0", "shh/6"])
async def test_a_restricting_light_node_refuses_another_light_node(capability: str) -> None:
    # Only `a` restricts, so exactly one side refuses and the outcome does not depend on who reads first.
    caps = (capability,)
    async with (
        running_node(FAST, capabilities=caps, light_node=True) as a,
        running_node(FAST, capabilities=caps, light_node=True, restrict_light_clients=False) as b,
    ):
        peer = await b.server.dial(a.enode)
        end = await asyncio.wait_for(peer.wait_closed(), 5)
        assert (end.reason, end.remote) == (DisconnectReason.SUBPROTOCOL_ERROR, True)  # as any bad Status
        await wait_until(lambda: a.node.metrics.peer_disconnects["both_light"] == 1, what="counted")
        assert a.node.metrics.peer_disconnects == {"both_light": 1}
        assert b.node.metrics.peer_disconnects == {}
        assert a.node.peers() == [] and b.node.peers() == []
        await wait_until(lambda: not a.server.peers and not b.server.peers, what="sessions gone")


async def test_two_light_nodes_with_the_default_refuse_each_other() -> None:
    async with (
        running_node(FAST, capabilities=("waku/1",), light_node=True) as a,
        running_node(FAST, capabilities=("waku/1",), light_node=True) as b,
    ):
        assert a.node.config.restrict_light_clients and b.node.config.restrict_light_clients  # status-go's
        peer = await b.server.dial(a.enode)
        end = await asyncio.wait_for(peer.wait_closed(), 5)
        assert end.reason == DisconnectReason.SUBPROTOCOL_ERROR
        await wait_until(lambda: not a.server.peers and not b.server.peers, what="sessions gone")
        # Whichever side processed the other's Status first refused it (the other may see the Disconnect
        # before it gets to the Status); one session each, nothing else was counted.
        counts = [a.node.metrics.peer_disconnects, b.node.metrics.peer_disconnects]
        assert all(set(m) <= {"both_light"} for m in counts)
        assert 1 <= sum(m["both_light"] for m in counts) <= 2
        assert a.node.peers() == [] and b.node.peers() == []


@pytest.mark.parametrize(
    ("light_a", "light_b", "restrict"),
    [(True, False, True), (False, True, True), (False, False, True), (True, True, False)],
)
async def test_light_nodes_are_kept_unless_both_are_light_and_restricted(
    light_a: bool, light_b: bool, restrict: bool
) -> None:
    caps = ("waku/1",)
    async with (
        running_node(FAST, capabilities=caps, light_node=light_a, restrict_light_clients=restrict) as a,
        running_node(FAST, capabilities=caps, light_node=light_b, restrict_light_clients=restrict) as b,
    ):
        await link(a, b)
        assert [p.light_node for p in a.node.peers()] == [light_b]
        assert [p.light_node for p in b.node.peers()] == [light_a]
        assert a.node.metrics.peer_disconnects == {} and b.node.metrics.peer_disconnects == {}
