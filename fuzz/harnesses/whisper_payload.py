"""The Whisper v6 message inside an envelope's Data (wakucodec.payload): flags, size, padding, signature.

A mailserver opens every enveloped 0x7e request with its symmetric or private key and parses the plaintext
(protocol-notes §2.1). The input is that plaintext; it is also sealed with AES-GCM (always) and ECIES (for
one input in sixteen: the slower path) and opened again, so the decrypt-then-parse path a peer reaches is the
one checked. Contract: ``parse`` raises only InvalidPayload; opening raises only DecryptionFailed /
InvalidPayload and agrees with ``parse``; an accepted message has its parts where the flags say, a recovered
signer that verifies, and (unsigned, with padding) rebuilds to the same payload and padding.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from wakucodec import ecies, payload, secp, symmetric
    from wakucodec.errors import InvalidPayload
    from wakucodec.keccak import keccak256

_KEY = symmetric.key_from_password(symmetric.MAILSERVER_PASSWORD)
_NONCE = bytes(range(12))
_PRIVATE = bytes.fromhex("b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291")
_PUBLIC = secp.public_key(_PRIVATE)


def _parse(data: bytes) -> payload.Message | None:
    try:
        return payload.parse(data)
    except InvalidPayload:
        return None


def _check(message: payload.Message, data: bytes) -> None:
    assert message.raw == data and message.flags == data[0]
    signed = bool(data[0] & payload.SIGNATURE_FLAG)
    assert (message.signature is not None) == signed == (message.signer is not None)
    if message.signature is not None and message.signer is not None:
        body = data[: -payload.SIGNATURE_LENGTH]
        assert message.signature == data[-payload.SIGNATURE_LENGTH :]
        assert secp.recover_public_key(keccak256(body), message.signature) == message.signer
        assert body.endswith(message.padding)
    elif message.padding:
        assert data.endswith(message.padding)
        rebuilt = payload.parse(payload.build(message.payload, padding=message.padding))
        assert (rebuilt.payload, rebuilt.padding) == (message.payload, message.padding)


def test_one_input(data: bytes) -> None:
    """Parse ``data`` as a plaintext, then open it sealed both ways; check the contract above."""
    message = _parse(data)
    if message is not None:
        _check(message, data)
    opened: payload.Message | None
    try:
        opened = payload.open_symmetric(symmetric.encrypt(_KEY, data, nonce=_NONCE), _KEY)
    except InvalidPayload:
        opened = None
    assert opened == message
    if len(data) % 16 == 0:
        try:
            opened = payload.open_asymmetric(ecies.encrypt(_PUBLIC, data), _PRIVATE)
        except InvalidPayload:
            opened = None
        assert opened == message


if __name__ == "__main__":
    fuzz_main(test_one_input)
