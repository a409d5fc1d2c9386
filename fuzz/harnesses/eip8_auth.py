"""The RLPx auth packet a listener reads first (devp2p.eip8 / devp2p.handshake; protocol-notes §5.1, §5.2).

Every input is used twice: as the bytes on the wire (``read_packet``: plain-packet detection, the size
prefix checked before the body is read, ECIES opening — the fuzzer cannot forge the MAC) and as the auth
*plaintext* that ``open_eip8`` would return, taken through the listener's steps of ``respond`` (decode, key
checks, signature recovery, the ack, the secrets) with the EIP-8 vectors' recipient state. Sealing each
plaintext first would cost an ECIES encryption per run for code the unit tests cover. Contract: only
HandshakeError and ConnectionLost escape, never a hang; an accepted auth's body re-encodes to the input's
first RLP item and its key is the proven remote key.
"""

from __future__ import annotations

import contextlib

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from devp2p import constants as c
    from devp2p.eip8 import AuthMessage, read_packet
    from devp2p.errors import ConnectionLost, HandshakeError
    from devp2p.handshake import Recipient
    from fuzz.support import BytesTransport, fuzz_main, run_sync

#: Node B of the EIP-8 test vectors: the listener, with its ephemeral key and nonce.
_KEY = bytes.fromhex("b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291")
_EPHEMERAL = bytes.fromhex("e238eb8e04fee6511ab04c6dd3c89ce097b11f25d584863ac2b6d5b35b1847e4")
_NONCE = bytes.fromhex("559aead08264d5795d3909718cdd05abd49572e84fe55590eef31a88a08fdffd")
_AUTH_PACKET = b"auth as received"  # only seeds the ingress MAC; any bytes do


def test_one_input(data: bytes) -> None:
    """Read ``data`` as a wire auth packet, then answer it as an auth plaintext."""
    with contextlib.suppress(HandshakeError, ConnectionLost):
        run_sync(read_packet(BytesTransport(data), _KEY, plain_size=c.ENC_AUTH_PLAIN_LENGTH))
    state = Recipient(_KEY, ephemeral_key=_EPHEMERAL, nonce=_NONCE)
    try:
        auth = AuthMessage.decode(data)
        state.handle_auth(auth)
        ack_packet = state.create_ack(padding=0)
        secrets = state.secrets(_AUTH_PACKET, ack_packet)
    except (HandshakeError, ConnectionLost):
        return
    assert data.startswith(auth.encode()) and secrets.remote_pubkey == auth.initiator_pubkey
    assert state.remote_ephemeral_pubkey is not None and len(ack_packet) > c.ECIES_OVERHEAD


if __name__ == "__main__":
    fuzz_main(test_one_input)
