"""Two of our nodes over real loopback sockets: handshake, Hello, ping/pong, subprotocols, disconnects."""

from __future__ import annotations

import asyncio

import pytest

from devp2p import DisconnectReason, PeerDisconnected, parse_enode
from tests.integration.devp2p.support import Recorder, running_server
from tests.unit.devp2p.support import wait_until


async def test_dial_hello_ping_messages_and_clean_disconnect() -> None:
    proto_a, proto_b = Recorder(send_on_start=b"\xc1\x0a"), Recorder(send_on_start=b"\xc1\x0b")
    async with running_server([proto_a]) as a, running_server([proto_b]) as b:
        assert a.port > 0 and parse_enode(a.enode).port == a.port
        peer = await b.dial(a.enode)
        assert peer.remote_id == a.pubkey and not peer.inbound and peer.snappy
        assert peer.hello.listen_port == a.port
        assert await proto_a.next() == (0, b"\xc1\x0b")
        assert await proto_b.next() == (0, b"\xc1\x0a")
        await wait_until(lambda: len(a.peers) == 1, what="inbound peer registered")
        inbound = a.peers[0]
        assert inbound.inbound and inbound.remote_id == b.pubkey
        assert a.get_peer(b.pubkey) is inbound and a.get_peer(inbound.remote_id_hash) is inbound

        assert await peer.ping(timeout=2) < 2
        assert await inbound.ping(timeout=2) < 2
        await peer.send("test", 5, b"\x82hi")
        await inbound.send("test", 6, b"\x83yes")
        assert await proto_a.next() == (5, b"\x82hi")
        assert await proto_b.next() == (6, b"\x83yes")

        await peer.disconnect(DisconnectReason.REQUESTED)
        await wait_until(lambda: not a.peers, what="inbound peer removed")
        assert proto_a.stopped == [(inbound, DisconnectReason.REQUESTED)]
        assert proto_b.stopped == [(peer, DisconnectReason.REQUESTED)]
        assert b.stats.disconnects_sent == {"requested": 1}
        assert a.stats.disconnects_received == {"requested": 1}
        assert a.stats.sessions == b.stats.sessions == 1 and b.stats.dials == 1


async def test_two_subprotocols_route_by_offset() -> None:
    shh_a, waku_a = Recorder(name="shh", version=6, length=128), Recorder(name="waku", version=1, length=128)
    shh_b, waku_b = Recorder(name="shh", version=6, length=128), Recorder(name="waku", version=1, length=128)
    old_waku_b = Recorder(name="waku", version=0, length=128)
    async with running_server([waku_a, shh_a]) as a, running_server([old_waku_b, waku_b, shh_b]) as b:
        peer = await b.dial(a.enode)
        assert [(str(n.capability), n.offset) for n in peer.capabilities] == [
            ("shh/6", 0x10),
            ("waku/1", 0x90),
        ]
        await peer.send("waku", 127, b"\x01")
        await peer.send("shh", 127, b"\x02")
        assert await waku_a.next() == (127, b"\x01")
        assert await shh_a.next() == (127, b"\x02")
        assert old_waku_b.started == []


async def test_shutdown_sends_quitting() -> None:
    proto_b = Recorder()
    async with running_server() as a, running_server([proto_b]) as b:
        peer = await b.dial(a.enode)
        await wait_until(lambda: len(a.peers) == 1, what="inbound session up")  # else a drops a handshake
        await a.stop()
        end = await peer.wait_closed()
        assert (end.reason, end.remote) == (DisconnectReason.QUITTING, True)
        assert a.stats.disconnects_sent == {"quitting": 1}
        assert b.stats.disconnects_received == {"quitting": 1}
        with pytest.raises(PeerDisconnected):
            await a.dial(b.enode)


async def test_useless_peer() -> None:
    async with running_server([Recorder(name="aaa")]) as a, running_server([Recorder(name="bbb")]) as b:
        with pytest.raises(PeerDisconnected) as info:
            await b.dial(a.enode)
        assert info.value.reason == DisconnectReason.USELESS_PEER
        await wait_until(lambda: a.stats.rejected["useless_peer"] == 1, what="useless peer counted")
        assert b.stats.rejected["useless_peer"] == 1  # both sides refuse
        assert not a.peers and not b.peers


async def test_static_peer_is_redialled() -> None:
    async with running_server() as a, running_server() as b:
        b.add_static_peer(a.enode)
        await wait_until(lambda: len(b.peers) == len(a.peers) == 1, what="static peer dialled")
        first = b.peers[0]
        await a.peers[0].disconnect(DisconnectReason.REQUESTED)
        await wait_until(lambda: len(b.peers) == 1 and b.peers[0] is not first, what="static peer redialled")
        assert b.stats.dials >= 2
        assert await b.remove_static_peer(a.pubkey)
        assert b.static_peers == ()
        await wait_until(lambda: not b.peers and not a.peers, what="static peer removed")


async def test_static_peer_redials_after_the_remote_comes_back() -> None:
    async with running_server() as b:
        async with running_server() as a:
            enode, key = a.enode, a.node_key
        b.add_static_peer(enode)  # a is down: dials fail and back off
        await wait_until(lambda: b.stats.rejected["dial_failed"] >= 2, what="failed dials")
        port = int(enode.rsplit(":", 1)[1])
        async with running_server(node_key=key, port=port) as a2:
            await wait_until(lambda: len(b.peers) == 1, what="reconnect after restart")
            assert b.peers[0].remote_id == a2.pubkey


async def test_dial_returns_the_existing_peer() -> None:
    async with running_server() as a, running_server() as b:
        first = await b.dial(a.enode)
        assert await b.dial(a.enode) is first
        both = await asyncio.gather(b.dial(a.enode), b.dial(a.enode))
        assert list(both) == [first, first]


async def test_simultaneous_dials_leave_one_session() -> None:
    async with running_server() as a, running_server() as b:
        results = await asyncio.gather(a.dial(b.enode), b.dial(a.enode), return_exceptions=True)
        assert any(not isinstance(r, BaseException) for r in results)
        # Each side sees two connections; whichever registers second is refused with 0x05 (geth does the same
        # and leaves the survivor, if any, to the redial logic).
        await wait_until(
            lambda: a.stats.rejected["already_connected"] + b.stats.rejected["already_connected"] >= 1,
            what="duplicate refused",
        )
        await wait_until(
            lambda: len(a.peers) == len(b.peers) <= 1 and all(not p.is_closed for p in a.peers + b.peers),
            what="consistent peer tables",
        )
