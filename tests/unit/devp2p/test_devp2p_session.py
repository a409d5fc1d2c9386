"""Sessions over the in-memory transport: Hello, dispatch, ping/pong, errors → disconnect reasons."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import weakref

import pytest

from devp2p import constants as c
from devp2p import handshake
from devp2p.abc import PeerAPI, SubProtocol
from devp2p.config import SessionConfig
from devp2p.connection import Connection, establish
from devp2p.errors import (
    DisconnectReason,
    HandshakeTimeout,
    InvalidIdentity,
    MalformedMessage,
    MessageTooLarge,
    PeerDisconnected,
    ProtocolError,
    UnexpectedIdentity,
)
from devp2p.hello import HelloPayload
from devp2p.messages import encode_frame_data
from devp2p.p2p import Disconnect, Hello
from devp2p.transport import MemoryTransport
from tests.leak_support import cycle_collector_off
from tests.unit.devp2p.support import FAST, Recorder, hello_for, peer_pair, wait_until
from wakucodec import secp


async def test_hello_exchange_sets_identity_and_snappy() -> None:
    proto_a, proto_b = Recorder(), Recorder()
    a, b, tasks = await peer_pair([proto_a], [proto_b])
    assert a.hello.node_id == a.remote_id and b.hello.node_id == b.remote_id
    assert a.snappy and b.snappy
    assert not a.inbound and b.inbound
    assert a.client_id == "test/v1"
    assert [str(cap) for cap in a.capabilities.capabilities] == ["test/1"]
    await a.disconnect()
    await asyncio.gather(*tasks)


async def test_messages_both_ways_and_lifecycle_hooks() -> None:
    proto_a, proto_b = Recorder(send_on_start=b"\xc1\x01"), Recorder(send_on_start=b"\xc1\x02")
    a, b, tasks = await peer_pair([proto_a], [proto_b])
    assert await proto_b.next() == (0, b"\xc1\x01")
    assert await proto_a.next() == (0, b"\xc1\x02")
    for i in range(20):
        await a.send("test", 7, bytes([0x80 + 3]) + b"abc")
        await b.send(proto_b, i % 8, b"\xc0")
    assert [await proto_b.next() for _ in range(20)] == [(7, b"\x83abc")] * 20
    assert [await proto_a.next() for _ in range(20)] == [(i % 8, b"\xc0") for i in range(20)]
    big = bytes(range(256)) * 4096  # 1 MiB, snappy on
    await a.send("test", 1, big)
    assert await proto_b.next() == (1, big)
    await b.disconnect(DisconnectReason.REQUESTED)
    end_a, end_b = await asyncio.gather(*tasks)
    assert end_b.reason == DisconnectReason.REQUESTED and not end_b.remote
    assert end_a.reason == DisconnectReason.REQUESTED and end_a.remote and end_a.error is None
    assert proto_a.stopped == [(a, DisconnectReason.REQUESTED)]
    assert proto_b.stopped == [(b, DisconnectReason.REQUESTED)]
    assert a.is_closed and b.is_closed
    with pytest.raises(PeerDisconnected):
        await a.send("test", 0, b"\xc0")


async def test_ping_pong_and_periodic_pings() -> None:
    config = dataclasses.replace(FAST, ping_interval=0.02)
    a, b, tasks = await peer_pair([Recorder()], [Recorder()], config, config)
    rtt = await a.ping(timeout=2)
    assert 0 <= rtt < 2
    # Both sides ping on their own every 20 ms; each ping is answered with a pong.
    await wait_until(lambda: b.messages_in >= 10 and a.messages_in >= 10, what="periodic pings")
    await a.disconnect()
    await asyncio.gather(*tasks)


async def test_handler_error_disconnects_with_0x10() -> None:
    proto_b = Recorder(fail_on={3})
    a, b, tasks = await peer_pair([Recorder()], [proto_b])
    await a.send("test", 3, b"\xc0")
    end_a, end_b = await asyncio.gather(*tasks)
    assert (end_b.reason, end_b.remote, type(end_b.error)) == (
        DisconnectReason.SUBPROTOCOL_ERROR,
        False,
        RuntimeError,
    )
    assert (end_a.reason, end_a.remote) == (DisconnectReason.SUBPROTOCOL_ERROR, True)
    assert proto_b.stopped == [(b, DisconnectReason.SUBPROTOCOL_ERROR)]


class _Refusing(SubProtocol):
    """Refuses every message with ``error`` (like wakunode an oversized packet), if any; keeps no peer."""

    name, version, length = "test", 1, 8

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    async def handle(self, peer: PeerAPI, code: int, payload: bytes) -> None:
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize("error", [ProtocolError("oversized"), RuntimeError("handler bug")])
async def test_a_session_ended_by_an_error_is_freed_by_reference_counting(error: Exception) -> None:
    """The error stays in ``session_end`` without its traceback, whose frames reference the peer and the
    refused packet: peer → end → error → traceback → frame → peer would be a cycle that only a full
    collection frees (the edge peer held ~1 MiB per peer dropped for an oversized packet that way)."""
    with cycle_collector_off():
        a, b, tasks = await peer_pair([_Refusing()], [_Refusing(error)])
        await a.send("test", 1, os.urandom(1 << 20))
        end_a, end_b = await asyncio.gather(*tasks)
        assert end_b.error is error and error.__traceback__ is None
        assert (end_b.reason, end_a.reason) == (
            (DisconnectReason.PROTOCOL_ERROR,) * 2
            if isinstance(error, ProtocolError)
            else (DisconnectReason.SUBPROTOCOL_ERROR,) * 2
        )
        peers = [weakref.ref(a), weakref.ref(b)]
        del a, b, tasks, end_a, end_b
        assert [ref() for ref in peers] == [None, None]


@pytest.mark.parametrize("error", [ProtocolError("bad status"), MalformedMessage("bad rlp")])
async def test_handler_protocol_error_disconnects_with_0x02(error: Exception) -> None:
    proto_b = Recorder(fail_on={0}, error=error)
    a, _, tasks = await peer_pair([Recorder()], [proto_b])
    await a.send("test", 0, b"\xc0")
    end_a, end_b = await asyncio.gather(*tasks)
    assert end_b.reason == end_a.reason == DisconnectReason.PROTOCOL_ERROR


async def test_handler_may_disconnect_itself() -> None:
    async def hang_up(peer: PeerAPI, code: int, payload: bytes) -> None:
        await peer.disconnect(DisconnectReason.USELESS_PEER)

    proto_b = Recorder(on_message=hang_up)
    a, _, tasks = await peer_pair([Recorder()], [proto_b])
    await a.send("test", 0, b"\xc0")
    end_a, end_b = await asyncio.gather(*tasks)
    assert end_b.reason == end_a.reason == DisconnectReason.USELESS_PEER
    assert end_a.remote and not end_b.remote


async def test_handler_may_raise_a_specific_reason() -> None:
    proto_b = Recorder(fail_on={2}, error=PeerDisconnected(DisconnectReason.TOO_MANY_PEERS, remote=False))
    a, _, tasks = await peer_pair([Recorder()], [proto_b])
    await a.send("test", 2, b"\xc0")
    end_a, end_b = await asyncio.gather(*tasks)
    assert end_b.reason == end_a.reason == DisconnectReason.TOO_MANY_PEERS and end_a.remote


async def test_message_id_out_of_range_disconnects_with_0x02() -> None:
    a, _b, tasks = await peer_pair([Recorder()], [Recorder()])
    await a._conn.write_message(0x10 + 8, b"\xc0")  # one past test/1's range
    end_a, end_b = await asyncio.gather(*tasks)
    assert (
        end_b.reason == DisconnectReason.PROTOCOL_ERROR and type(end_b.error).__name__ == "InvalidMessageCode"
    )
    assert end_a.reason == DisconnectReason.PROTOCOL_ERROR and end_a.remote


async def test_unknown_base_protocol_ids_are_ignored() -> None:
    proto_b = Recorder()
    a, b, tasks = await peer_pair([Recorder()], [proto_b])
    for code in (0x00, 0x04, 0x0F):  # a second Hello and unassigned ids
        await a._conn.write_message(code, b"\xc0")
    await a.send("test", 1, b"\xc0")
    assert await proto_b.next() == (1, b"\xc0")
    assert not b.is_closed
    await a.disconnect()
    await asyncio.gather(*tasks)


async def test_oversized_base_protocol_message_is_a_protocol_error() -> None:
    a, _b, tasks = await peer_pair([Recorder()], [Recorder()])
    await a._conn.write_message(c.PING_CODE, bytes(c.BASE_PROTOCOL_MAX_MSG_SIZE + 1))
    _, end_b = await asyncio.gather(*tasks)
    assert end_b.reason == DisconnectReason.PROTOCOL_ERROR and isinstance(end_b.error, MessageTooLarge)


async def test_read_timeout_sends_0x0b() -> None:
    quiet = dataclasses.replace(FAST, ping_interval=60.0)
    impatient = dataclasses.replace(FAST, frame_read_timeout=0.1, ping_interval=60.0)
    _, _, tasks = await peer_pair([Recorder()], [Recorder()], quiet, impatient)
    end_a, end_b = await asyncio.gather(*tasks)
    assert (end_b.reason, end_b.remote) == (DisconnectReason.READ_TIMEOUT, False)
    assert (end_a.reason, end_a.remote) == (DisconnectReason.READ_TIMEOUT, True)


async def test_remote_vanishing_is_a_network_error() -> None:
    a, _b, tasks = await peer_pair([Recorder()], [Recorder()])
    a._conn.transport.abort()
    end_b = await tasks[1]
    assert (end_b.reason, end_b.remote) == (DisconnectReason.NETWORK_ERROR, True)
    await tasks[0]


# --- Hello-phase failures, with a hand-driven initiator -----------------------------------------------------


async def _raw_initiator(
    config: SessionConfig = FAST,
) -> tuple[Connection, bytes, asyncio.Task[tuple[Connection, HelloPayload]]]:
    """Run a real responder (establish) against a manual initiator that stops after the handshake."""
    key_a, key_b = secp.generate_private_key(), secp.generate_private_key()
    end_a, end_b = MemoryTransport.connected_pair()
    responder = asyncio.get_running_loop().create_task(
        establish(end_b, key_b, hello_for(key_b, [Recorder()]), config)
    )
    secrets = await handshake.initiate(end_a, key_a, secp.public_key(key_b))
    return Connection(end_a, secrets, config), key_a, responder


async def _expect_disconnect(conn: Connection, reason: DisconnectReason) -> None:
    code, data = await conn.read_message(timeout=2)
    if code == c.HELLO_CODE:  # the responder sends its Hello first
        code, data = await conn.read_message(timeout=2)
    assert code == c.DISCONNECT_CODE
    assert Disconnect.decode(data) == reason


@pytest.mark.parametrize(
    ("node_id", "error", "reason"),
    [
        (bytes(64), InvalidIdentity, DisconnectReason.INVALID_IDENTITY),
        (b"\x01" * 63, InvalidIdentity, DisconnectReason.INVALID_IDENTITY),
        (
            secp.public_key(secp.generate_private_key()),
            UnexpectedIdentity,
            DisconnectReason.UNEXPECTED_IDENTITY,
        ),
    ],
)
async def test_hello_identity_checks(
    node_id: bytes, error: type[Exception], reason: DisconnectReason
) -> None:
    conn, key_a, responder = await _raw_initiator()
    hello = dataclasses.replace(hello_for(key_a, [Recorder()]), node_id=node_id)
    await conn.write_message(c.HELLO_CODE, Hello.encode(hello))
    with pytest.raises(error):
        await responder
    await _expect_disconnect(conn, reason)


async def test_non_hello_first_message_is_a_protocol_error() -> None:
    conn, _, responder = await _raw_initiator()
    await conn.write_message(c.PING_CODE, b"\xc0")
    with pytest.raises(ProtocolError, match="expected Hello"):
        await responder
    await _expect_disconnect(conn, DisconnectReason.PROTOCOL_ERROR)


async def test_disconnect_instead_of_hello() -> None:
    conn, _, responder = await _raw_initiator()
    await conn.write_message(c.DISCONNECT_CODE, Disconnect.encode(DisconnectReason.TOO_MANY_PEERS))
    with pytest.raises(PeerDisconnected) as info:
        await responder
    assert info.value.remote and info.value.reason == DisconnectReason.TOO_MANY_PEERS


async def test_oversized_frame_before_hello_is_refused_unread() -> None:
    conn, _, responder = await _raw_initiator()
    frame = conn._codec.encode(encode_frame_data(c.HELLO_CODE, bytes(4000), snappy=False))
    conn.transport.write(frame[:32])  # header only
    with pytest.raises(MessageTooLarge):
        await responder


async def test_silent_peer_times_out_within_the_handshake_timeout() -> None:
    config = dataclasses.replace(FAST, handshake_timeout=0.2)
    conn, _, responder = await _raw_initiator(config)
    with pytest.raises(HandshakeTimeout):
        await responder
    await _expect_disconnect(conn, DisconnectReason.READ_TIMEOUT)


async def test_old_remote_version_means_no_snappy() -> None:
    conn, key_a, responder = await _raw_initiator()
    await conn.write_message(c.HELLO_CODE, Hello.encode(hello_for(key_a, [Recorder()], version=4)))
    b_conn, remote_hello = await responder
    assert remote_hello.version == 4 and not b_conn.snappy
    code, _ = await conn.read_message(timeout=2)
    assert code == c.HELLO_CODE
    await b_conn.write_message(c.PING_CODE, b"\xc0")
    assert await conn.read_message(timeout=2) == (c.PING_CODE, b"\xc0")  # uncompressed
