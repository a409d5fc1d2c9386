"""The first message of a session (devp2p.connection.exchange_hello): Hello, or a Disconnect instead.

The input is the content of the first frame the remote sends — ``RLP(message id) ‖ data`` — delivered over a
real :class:`~devp2p.connection.Connection` of the EIP-8 vectors' session, read by ``exchange_hello``
(geth ``doProtoHandshake``; protocol-notes §5.6, §5.7). An accepted Hello's capabilities are negotiated
against ours (waku/1, waku/0, shh/6). Contract: only DevP2PError subclasses escape (MalformedMessage,
ProtocolError and its identity errors, PeerDisconnected, MessageTooLarge); an accepted Hello names the
handshake key, re-encodes to a Hello that decodes the same, and switches snappy on for version ≥ 5;
negotiation packs matching capabilities from 0x10 without gaps.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from devp2p import constants as c
    from devp2p.abc import PeerAPI, SubProtocol
    from devp2p.capabilities import CapabilityTable
    from devp2p.config import SessionConfig
    from devp2p.connection import Connection, exchange_hello
    from devp2p.errors import DevP2PError
    from devp2p.frame import FrameCodec
    from devp2p.hello import HelloPayload
    from devp2p.p2p import Hello
    from fuzz.support import BytesTransport, fuzz_main, run_async, session_pair
    from wakucodec import secp


class _Protocol(SubProtocol):
    """A capability we advertise; never started (negotiation only)."""

    def __init__(self, name: str, version: int, length: int) -> None:
        self.name, self.version, self.length = name, version, length

    async def handle(self, peer: PeerAPI, code: int, payload: bytes) -> None:
        """Never called."""


_OURS = (_Protocol("waku", 1, 128), _Protocol("waku", 0, 128), _Protocol("shh", 6, 128))
_OUR_HELLO = HelloPayload(5, "mailmesh/fuzz", tuple(p.capability for p in _OURS), 0, bytes(64))
_CONFIG = SessionConfig()


def _negotiate(hello: HelloPayload) -> None:
    table = CapabilityTable.negotiate(_OURS, hello.capabilities)
    offset = c.BASE_PROTOCOL_LENGTH
    for entry in table:
        assert entry.offset == offset and entry.capability in hello.capabilities
        assert table.resolve(entry.offset) == (entry, 0)
        offset = entry.end
    assert len({entry.protocol.name for entry in table}) == len(table)


def test_one_input(data: bytes) -> None:
    """Deliver ``data`` as the remote's first frame and run the Hello exchange."""
    remote, local = session_pair()
    if len(data) > c.MAX_PRE_HELLO_FRAME_SIZE:
        return  # refused by its frame header before it is read: the frame harness covers that
    transport = BytesTransport(FrameCodec.from_secrets(remote).encode(data))
    conn = Connection(transport, local, _CONFIG)
    try:
        hello = run_async(exchange_hello(conn, _OUR_HELLO))
    except DevP2PError:
        return
    assert hello.node_id == conn.remote_pubkey == secp.public_key(bytes.fromhex(_A_STATIC))
    assert conn.snappy == (hello.version >= c.SNAPPY_PROTOCOL_VERSION)
    assert Hello.decode(Hello.encode(hello)) == hello
    _negotiate(hello)


_A_STATIC = "49a7b37aa6f6645917e7b807e9d1c00d4fa71f18343b0d4122a4d2df64dd6fee"

if __name__ == "__main__":
    fuzz_main(test_one_input)
