"""The RLPx ack packet a dialler reads (devp2p.eip8 / devp2p.handshake; protocol-notes §5.1, §5.2).

Every input is used twice: as the bytes on the wire (``read_packet``: plain-packet detection, the size prefix
checked before the body is read, ECIES opening) and as the ack *plaintext* that ``open_eip8`` would return,
taken through the dialler's steps of ``initiate`` (decode, check the ephemeral key, derive the secrets) with
the EIP-8 vectors' initiator state. Sealing each plaintext first would cost an ECIES encryption per run for
code the unit tests cover. Contract: only HandshakeError and ConnectionLost escape,
never a hang; an accepted ack's body re-encodes to the input's first RLP item and its ephemeral key is on
the curve.
"""

from __future__ import annotations

import contextlib

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from devp2p import constants as c
    from devp2p.eip8 import AckMessage, read_packet
    from devp2p.errors import ConnectionLost, HandshakeError
    from devp2p.handshake import Initiator
    from fuzz.support import BytesTransport, fuzz_main, run_sync
    from wakucodec import secp

#: Node A of the EIP-8 test vectors: the dialler, with its ephemeral key and nonce.
_KEY = bytes.fromhex("49a7b37aa6f6645917e7b807e9d1c00d4fa71f18343b0d4122a4d2df64dd6fee")
_EPHEMERAL = bytes.fromhex("869d6ecf5211f1cc60418a13b9d870b22959d0c16f02bec714c960dd2298a32d")
_NONCE = bytes.fromhex("7e968bba13b6c50e2c4cd7f241cc0d64d1ac25c7f5952df231ac6a2bda8ee5d6")
_REMOTE = secp.public_key(bytes.fromhex("b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291"))
_AUTH_PACKET = b"auth as sent"  # with the ack packet, only seeds the MACs; any bytes do
_ACK_PACKET = b"ack as received"


def test_one_input(data: bytes) -> None:
    """Read ``data`` as a wire ack packet, then take it as an ack plaintext."""
    with contextlib.suppress(HandshakeError, ConnectionLost):
        run_sync(read_packet(BytesTransport(data), _KEY, plain_size=c.ENC_ACK_PLAIN_LENGTH))
    state = Initiator(_KEY, _REMOTE, ephemeral_key=_EPHEMERAL, nonce=_NONCE)
    try:
        ack = AckMessage.decode(data)
        state.handle_ack(ack)
        secrets = state.secrets(_AUTH_PACKET, _ACK_PACKET)
    except (HandshakeError, ConnectionLost):
        return
    assert data.startswith(ack.encode())
    assert secp.validate_public_key(ack.ephemeral_pubkey) == ack.ephemeral_pubkey
    assert secrets.remote_pubkey == _REMOTE and len(secrets.aes_secret) == 32


if __name__ == "__main__":
    fuzz_main(test_one_input)
