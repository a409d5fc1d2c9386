"""The first message of a session (devp2p.connection.exchange_hello): Hello, or a Disconnect instead.

The input is the content of the first frame the remote sends — ``RLP(message id) ‖ data`` — as
``Connection.read_message`` returns it (``decode_frame_data``, snappy off before Hello), read by
``exchange_hello`` (geth ``doProtoHandshake``; protocol-notes §5.6, §5.7) with the EIP-8 vectors' remote
key. The connection is a stand-in holding that frame: decrypting it is the ``frame`` harness's subject, and
a real one needs an event loop per run (its read timeout), which made this harness ten times slower. An
accepted Hello's capabilities are negotiated against ours (waku/1, waku/0, shh/6). Contract: only
DevP2PError subclasses escape (MalformedMessage, ProtocolError and its identity errors, PeerDisconnected,
MessageTooLarge); an accepted Hello names the handshake key, re-encodes to a Hello that decodes the same,
and switches snappy on for version ≥ 5; negotiation packs matching capabilities from 0x10 without gaps.
"""

from __future__ import annotations

from typing import cast

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from devp2p import constants as c
    from devp2p.abc import PeerAPI, SubProtocol
    from devp2p.capabilities import CapabilityTable
    from devp2p.connection import Connection, exchange_hello
    from devp2p.errors import DevP2PError
    from devp2p.hello import HelloPayload
    from devp2p.messages import decode_frame_data
    from devp2p.p2p import Hello
    from fuzz.support import fuzz_main, run_sync, static_key
    from wakucodec import secp


class _Protocol(SubProtocol):
    """A capability we advertise; never started (negotiation only)."""

    def __init__(self, name: str, version: int, length: int) -> None:
        self.name, self.version, self.length = name, version, length

    async def handle(self, peer: PeerAPI, code: int, payload: bytes) -> None:
        """Never called."""


class _Connection:
    """What ``exchange_hello`` uses of a :class:`Connection`, holding the remote's first frame."""

    remote_pubkey = secp.public_key(static_key("A"))

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.snappy = False
        self.sent: list[tuple[int, bytes]] = []

    async def write_message(self, code: int, payload: bytes, *, timeout: float | None = None) -> None:
        self.sent.append((code, payload))

    async def read_message(self, *, timeout: float | None = None) -> tuple[int, bytes]:
        return decode_frame_data(self.frame, snappy=False, max_size=c.MAX_PRE_HELLO_FRAME_SIZE)

    def hello_completed(self, remote_version: int) -> None:
        self.snappy = remote_version >= c.SNAPPY_PROTOCOL_VERSION


_OURS = (_Protocol("waku", 1, 128), _Protocol("waku", 0, 128), _Protocol("shh", 6, 128))
_OUR_HELLO = HelloPayload(5, "mailmesh/fuzz", tuple(p.capability for p in _OURS), 0, bytes(64))


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
    conn = _Connection(data)
    try:
        hello = run_sync(exchange_hello(cast(Connection, conn), _OUR_HELLO))
    except DevP2PError:
        return
    assert conn.sent == [(c.HELLO_CODE, Hello.encode(_OUR_HELLO))]
    assert hello.node_id == conn.remote_pubkey
    assert conn.snappy == (hello.version >= c.SNAPPY_PROTOCOL_VERSION)
    assert Hello.decode(Hello.encode(hello)) == hello
    _negotiate(hello)


if __name__ == "__main__":
    fuzz_main(test_one_input)
