"""Hostile input over real loopback sockets: each attack gets the right reason or drop and is counted, and the
server keeps serving a well-behaved peer throughout
(protocol-notes §5.9; docs/design.md "Limits and defences")."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from devp2p import constants as c
from devp2p import handshake
from devp2p.errors import ConnectionLost, DisconnectReason, PeerDisconnected
from devp2p.messages import encode_frame_data
from devp2p.peer import Peer
from devp2p.server import Server
from tests.integration.devp2p.support import CONFIG, RawClient, Recorder, hello_for, running_server
from tests.unit.devp2p.support import wait_until
from tests.unit.devp2p.vectors import AUTH_1, AUTH_2, STATIC_KEY_B
from wakucodec import secp


@dataclass
class Guarded:
    """The server under attack and a well-behaved peer connected to it the whole time."""

    server: Server
    server_proto: Recorder
    good: Peer
    good_proto: Recorder

    async def check_good_peer(self) -> None:
        """The good peer's session still works in both directions."""
        assert not self.good.is_closed
        assert await self.good.ping(timeout=2) < 2
        await self.good.send("test", 1, b"\x82ok")
        assert await self.server_proto.next() == (1, b"\x82ok")
        inbound = next(p for p in self.server.peers if p.client_id == "good/v1")
        await inbound.send("test", 2, b"\x83yes")
        assert await self.good_proto.next() == (2, b"\x83yes")


@asynccontextmanager
async def guarded(**overrides: Any) -> AsyncIterator[Guarded]:
    """A server (with ``overrides``) plus a good peer; on exit, checks the good peer was never disturbed."""
    server_proto, good_proto = Recorder(), Recorder()
    async with (
        running_server([server_proto], **overrides) as server,
        running_server([good_proto], dataclasses.replace(CONFIG, client_id="good/v1", listen=False)) as good,
    ):
        peer = await good.dial(server.enode)
        await wait_until(lambda: len(server.peers) == 1, what="good peer registered")
        g = Guarded(server, server_proto, peer, good_proto)
        yield g
        await g.check_good_peer()
        assert g.good.messages_in > 0 and server.peers[0].client_id == "good/v1"


# --- before / during the encryption handshake ---------------------------------------------------------------


async def test_random_bytes_instead_of_auth() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        client.write(b"\x01\xb3" + os.urandom(435))  # a plausible size prefix, garbage ECIES
        assert await client.expect_closed() == b""
        await wait_until(lambda: g.server.stats.rejected["handshake_failed"] == 1, what="counted")
        assert g.server.stats.errors["HandshakeError"] == 1


async def test_huge_size_prefix_is_dropped_without_reading_the_body() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        client.write(b"\xff\xff" + os.urandom(305))  # claims 64 KiB; nothing more is sent
        assert await client.expect_closed() == b""
        # Refused at once for its size, not dropped when the handshake timer ran out.
        assert g.server.stats.rejected["handshake_failed"] == 1
        assert g.server.stats.rejected["handshake_timeout"] == 0


async def test_truncated_auth_then_eof() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        client.write(AUTH_2[:200])
        client.transport._writer.write_eof()
        assert await client.expect_closed() == b""
        await wait_until(lambda: g.server.stats.rejected["connection_lost"] == 1, what="counted")


async def test_truncated_auth_left_open_times_out() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        client.write(AUTH_2[:200])
        start = time.monotonic()
        assert await client.expect_closed() == b""
        assert time.monotonic() - start < CONFIG.session.handshake_timeout + 1
        assert g.server.stats.rejected["handshake_timeout"] == 1


async def test_pre_eip8_auth_is_refused() -> None:
    async with guarded(node_key=STATIC_KEY_B) as g:  # AUTH_1 is addressed to static key B
        client = await RawClient.connect(g.server)
        client.write(AUTH_1)
        assert await client.expect_closed() == b""
        assert g.server.stats.rejected["plain_handshake"] == 1


async def test_replayed_auth_from_a_captured_session() -> None:
    async with guarded() as g:
        victim = await RawClient.connect(g.server)
        await victim.full_session(g.server)
        await wait_until(lambda: len(g.server.peers) == 2, what="victim session")
        captured = bytes(victim.transport.sent)  # auth ‖ Hello frame, exactly as sent
        victim.close()
        await wait_until(lambda: len(g.server.peers) == 1, what="victim gone")

        attacker = await RawClient.connect(g.server)
        attacker.write(captured)  # the server answers with a fresh ack; the old Hello frame cannot verify
        await attacker.expect_closed()
        await wait_until(lambda: g.server.stats.errors["BadMAC"] == 1, what="bad MAC counted")
        assert g.server.stats.rejected["protocol_error"] == 1
        assert len(g.server.peers) == 1


# --- after the handshake ------------------------------------------------------------------------------------


async def test_hello_with_another_node_id() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        await client.handshake(g.server)
        other = secp.public_key(secp.generate_private_key())
        await client.send_hello(dataclasses.replace(hello_for(client.key, [Recorder()]), node_id=other))
        assert await client.expect_disconnect() == DisconnectReason.UNEXPECTED_IDENTITY
        await wait_until(lambda: g.server.stats.rejected["unexpected_identity"] == 1, what="counted")
        assert g.server.stats.disconnects_sent["unexpected_identity"] == 1


async def test_peer_that_never_sends_hello_is_dropped_within_the_handshake_timeout() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        start = time.monotonic()
        await client.handshake(g.server)
        assert await client.expect_disconnect() == DisconnectReason.READ_TIMEOUT
        assert time.monotonic() - start < CONFIG.session.handshake_timeout + 1.0
        await wait_until(lambda: g.server.stats.rejected["handshake_timeout"] == 1, what="counted")


async def test_bad_mac_mid_stream() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        await client.full_session(g.server)
        assert client.conn is not None
        await client.conn.write_message(0x10, b"\xc0")  # fine
        frame = bytearray(client.conn._codec.encode(encode_frame_data(0x11, b"\xc0", snappy=True)))
        frame[40] ^= 0x01  # flip a body bit: the header verifies, the frame MAC does not
        client.write(bytes(frame))
        assert await client.expect_disconnect() == DisconnectReason.PROTOCOL_ERROR
        await wait_until(lambda: g.server.stats.errors["BadMAC"] == 1, what="counted")
        assert g.server.stats.disconnects_sent["protocol_error"] == 1
        assert await g.server_proto.next() == (0, b"\xc0")  # the good message before it was delivered


@pytest.mark.parametrize("after_hello", [False, True])
async def test_oversized_frame_header(after_hello: bool) -> None:
    session = dataclasses.replace(CONFIG.session, max_frame_size=1 << 20)
    async with guarded(session=session) as g:
        client = await RawClient.connect(g.server)
        if after_hello:
            await client.full_session(g.server)
        else:
            await client.handshake(g.server)  # before Hello the limit is 2 KiB + the message id
        assert client.conn is not None
        # Only the header of a 16 MiB frame: the server must refuse it without waiting for the body.
        client.write(client.conn._codec.encode_header(c.MAX_FRAME_SIZE))
        assert await client.expect_disconnect() == DisconnectReason.PROTOCOL_ERROR
        await wait_until(lambda: g.server.stats.errors["MessageTooLarge"] == 1, what="counted")


async def test_unknown_message_id() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        await client.full_session(g.server)
        assert client.conn is not None
        await client.conn.write_message(0x0C, b"\xc0")  # unassigned base id: ignored
        await client.conn.write_message(0x10 + 8, b"\xc0")  # past test/1 (length 8)
        assert await client.expect_disconnect() == DisconnectReason.PROTOCOL_ERROR
        await wait_until(lambda: g.server.stats.errors["InvalidMessageCode"] == 1, what="counted")


async def test_handler_crash_disconnects_only_that_peer() -> None:
    async with guarded() as g:
        g.server_proto.fail_on.add(7)
        client = await RawClient.connect(g.server)
        await client.full_session(g.server)
        assert client.conn is not None
        await client.conn.write_message(0x10 + 7, b"\xc0")
        assert await client.expect_disconnect() == DisconnectReason.SUBPROTOCOL_ERROR
        await wait_until(lambda: g.server.stats.errors["RuntimeError"] == 1, what="counted")
        g.server_proto.fail_on.clear()


async def test_peer_that_does_not_read_hits_the_write_timeout() -> None:
    blob = os.urandom(1 << 20)  # incompressible

    async def flood(peer: object, code: int, payload: bytes) -> None:
        assert isinstance(peer, Peer)
        while True:
            await peer.send("test", 3, blob)

    session = dataclasses.replace(CONFIG.session, frame_write_timeout=0.3)
    async with guarded(session=session) as g:
        g.server_proto.on_message = flood
        client = await RawClient.connect(g.server)
        await client.full_session(g.server)
        assert client.conn is not None
        await client.conn.write_message(0x10 + 4, b"\xc0")  # triggers the flood; then never read again
        await wait_until(lambda: g.server.stats.errors["WriteTimeout"] == 1, timeout=10, what="write timeout")
        assert g.server.stats.disconnects_sent.get("network_error", 0) == 0  # nothing sent to a non-reader
        g.server_proto.on_message = None
        client.close()


# --- server limits ----------------------------------------------------------------------------------------


async def test_too_many_peers() -> None:
    async with guarded(max_peers=1) as g:
        client = await RawClient.connect(g.server)
        await client.handshake(g.server)
        assert await client.expect_disconnect() == DisconnectReason.TOO_MANY_PEERS  # before any Hello
        assert g.server.stats.rejected["too_many_peers"] == 1
        g.server.set_trusted(secp.public_key(b"\x07" * 32), True)  # trusted peers are exempt
        trusted = await RawClient.connect(g.server, key=b"\x07" * 32)
        await trusted.full_session(g.server)
        await wait_until(lambda: len(g.server.peers) == 2, what="trusted peer admitted")
        trusted.close()


async def test_already_connected() -> None:
    async with guarded() as g:
        key = secp.generate_private_key()
        first = await RawClient.connect(g.server, key)
        await first.full_session(g.server)
        await wait_until(lambda: len(g.server.peers) == 2, what="first session")
        second = await RawClient.connect(g.server, key)
        await second.handshake(g.server)
        assert await second.expect_disconnect() == DisconnectReason.ALREADY_CONNECTED
        assert g.server.stats.rejected["already_connected"] == 1
        first.close()


async def test_connection_to_self() -> None:
    async with guarded() as g:
        with pytest.raises(PeerDisconnected) as info:
            await g.server.dial(g.server.enode)
        assert info.value.reason == DisconnectReason.SELF
        await wait_until(lambda: g.server.stats.rejected["self"] == 2, what="both ends refused")  # in and out
        assert g.server.stats.disconnects_sent["self"] >= 1


async def test_inbound_throttle_per_ip() -> None:
    async with running_server(inbound_throttle=30.0, throttle_exempt_lan=False) as server:
        first = await RawClient.connect(server)
        await first.full_session(server)
        second = await RawClient.connect(server)
        assert await second.expect_closed() == b""
        assert server.stats.rejected["throttled"] == 1
        assert len(server.peers) == 1  # the first session is untouched
        first.close()


async def test_pending_handshake_limit() -> None:
    async with guarded(max_pending_peers=1) as g:
        stalled = await RawClient.connect(g.server)  # connects, sends nothing: occupies the only slot
        await wait_until(lambda: g.server.stats.inbound_accepted == 2, what="stalled accepted")
        refused = await RawClient.connect(g.server)
        assert await refused.expect_closed() == b""
        assert g.server.stats.rejected["pending_limit"] == 1
        assert await stalled.expect_closed() == b""  # then the handshake timeout frees the slot
        assert g.server.stats.rejected["handshake_timeout"] == 1


async def test_dial_failures_are_counted() -> None:
    async with running_server() as server:
        async with running_server() as gone:
            enode = gone.enode
        with pytest.raises(ConnectionLost):
            await server.dial(enode)
        assert server.stats.rejected["dial_failed"] == 1
        with pytest.raises(ValueError):
            await server.dial("enode://nope")


async def test_handshake_only_client_cannot_hold_the_server() -> None:
    # Many half-open connections: each is dropped at the handshake timeout; the good peer is unaffected.
    async with guarded() as g:
        clients = [await RawClient.connect(g.server) for _ in range(10)]
        await asyncio.gather(*(cl.expect_closed(timeout=3) for cl in clients))
        await wait_until(lambda: g.server.stats.rejected["handshake_timeout"] == 10, what="all timed out")


async def test_initiate_against_wrong_key_fails_cleanly() -> None:
    async with guarded() as g:
        client = await RawClient.connect(g.server)
        wrong = secp.public_key(secp.generate_private_key())  # auth encrypted to somebody else
        with pytest.raises(ConnectionLost):
            await handshake.initiate(client.transport, client.key, wrong)
        assert g.server.stats.rejected["handshake_failed"] == 1
