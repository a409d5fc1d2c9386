"""The Whisper v6 message: the plaintext inside an envelope's ``Data``, and sealing/opening it.

Layout (docs/protocol-notes.md §2.1; G920/SG ``message.go``; EIP-627 "Contents of Data Field")::

    flags (1) ‖ payload size (1..3 bytes, little-endian) ‖ payload ‖ padding ‖ [signature (65)]

``flags & 0x03`` is the length of the size field, ``flags & 0x04`` says a signature is present. Padding
brings everything (signature included) to a multiple of 256 (§2.2). The signature is geth ``crypto.Sign``
over ``keccak256`` of every byte before it, taken after the signature flag is set (§2.3).

Parsing follows status-go's ``ValidateAndParse`` (SG ``waku/common/message.go``), which is geth's plus two
bounds checks; the accepted set is identical to geth's, because every input that passes geth's weaker
``size + 1 > end`` test but fails ours makes geth panic slicing ``Raw[beg:end]`` with ``beg > end``.
Go is lenient, and so are we, about: unknown flag bits 3-7 (ignored), a size field longer than needed,
padding of any length (even none, and not a multiple of 256), ``flags & 3 == 0`` (no payload; everything up
to the signature is padding) and high-S signatures or ``V ∈ {2, 3}``. We check the size field *before* the
expensive signature recovery (Go does it after); the outcome is the same, only cheaper for garbage.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from wakucodec import ecies, secp, symmetric
from wakucodec.errors import InvalidPayload, InvalidSignature, SizeLimitExceeded
from wakucodec.keccak import keccak256

__all__ = [
    "MAX_PAYLOAD_SIZE",
    "PADDING_BLOCK",
    "SIGNATURE_FLAG",
    "SIGNATURE_LENGTH",
    "SIZE_MASK",
    "Message",
    "build",
    "open_asymmetric",
    "open_symmetric",
    "padding_length",
    "parse",
    "seal_asymmetric",
    "seal_symmetric",
    "size_field_length",
]

#: ``flags & SIZE_MASK`` = number of bytes of the payload-size field (geth ``SizeMask``).
SIZE_MASK = 0x03
#: ``flags & SIGNATURE_FLAG`` = a 65-byte signature ends the message (geth ``signatureFlag``).
SIGNATURE_FLAG = 0x04
#: geth ``signatureLength``.
SIGNATURE_LENGTH = secp.SIGNATURE_LENGTH
#: Padding makes the message a multiple of this (geth ``padSizeLimit``).
PADDING_BLOCK = 256
#: Largest payload a 2-bit size-field length can describe: 3 bytes. geth would write a 4-byte field for
#: 16 MiB and OR 4 into the flags — i.e. set the signature flag by accident; the 10 MiB envelope cap keeps
#: that out of reach, and we refuse it outright.
MAX_PAYLOAD_SIZE = 256**3 - 1


@dataclass(frozen=True, slots=True)
class Message:
    """A parsed Whisper v6 message (geth ``ReceivedMessage`` without the envelope fields)."""

    payload: bytes
    """The application payload (empty when ``flags & 3 == 0``)."""
    padding: bytes
    """Bytes between the payload and the signature (or the end)."""
    signature: bytes | None
    """The 65-byte ``R ‖ S ‖ V`` signature, or None if the message is unsigned."""
    signer: bytes | None
    """The 64-byte public key recovered from ``signature``, or None if unsigned (geth ``Src``)."""
    raw: bytes
    """The whole plaintext as parsed (flags through signature)."""

    @property
    def flags(self) -> int:
        """The flags byte."""
        return self.raw[0]


def size_field_length(payload_len: int) -> int:
    """Return the number of bytes of the size field for a payload (geth ``getSizeOfPayloadSizeField``)."""
    if payload_len < 0 or payload_len > MAX_PAYLOAD_SIZE:
        raise SizeLimitExceeded("Whisper payload", payload_len, MAX_PAYLOAD_SIZE)
    return 1 if payload_len < 256 else 2 if payload_len < 65536 else 3


def padding_length(payload_len: int, *, signed: bool) -> int:
    """Return the random-padding length geth's ``appendPadding`` picks: in ``[1, 256]``, never 0.

    ``256 - (1 + size_field + payload_len (+65 if signed)) % 256`` — a full 256 when already aligned.
    """
    raw_size = 1 + size_field_length(payload_len) + payload_len + (SIGNATURE_LENGTH if signed else 0)
    return PADDING_BLOCK - raw_size % PADDING_BLOCK


def build(payload: bytes, *, signing_key: bytes | None = None, padding: bytes | None = None) -> bytes:
    """Build the plaintext of a message (geth ``NewSentMessage`` + ``sign``).

    ``padding`` is used as-is when given and non-empty; ``None`` *or* ``b""`` means random padding, as in
    geth (``len(params.Padding) != 0``). With ``signing_key`` the signature flag is set, then everything so
    far is hashed with keccak256 and signed, and the 65-byte signature appended. SizeLimitExceeded for a
    payload over :data:`MAX_PAYLOAD_SIZE`, InvalidKey for a bad signing key.
    """
    payload = bytes(payload)
    n = size_field_length(len(payload))
    if signing_key is not None:
        signing_key = secp.validate_private_key(signing_key)
    if not padding:
        padding = os.urandom(padding_length(len(payload), signed=signing_key is not None))
    flags = n | (SIGNATURE_FLAG if signing_key is not None else 0)  # flag set before signing (§2.3)
    body = bytes((flags,)) + len(payload).to_bytes(n, "little") + payload + bytes(padding)
    if signing_key is None:
        return body
    return body + secp.sign_recoverable(keccak256(body), signing_key)


def parse(plaintext: bytes) -> Message:
    """Parse and validate a decrypted plaintext (SG ``ValidateAndParse``); InvalidPayload on any defect.

    Rejects: empty input; a signed message with no room for more than the flags byte before the signature
    (``len - 65 <= 1``); a size field or declared payload running past the padding/signature boundary; and a
    signature from which no key can be recovered (the cause is chained as InvalidSignature).
    """
    raw = bytes(plaintext)
    end = len(raw)
    if end < 1:
        raise InvalidPayload("empty message")
    flags = raw[0]
    signed = bool(flags & SIGNATURE_FLAG)
    if signed:
        end -= SIGNATURE_LENGTH
        if end <= 1:
            raise InvalidPayload(f"signed message of {len(raw)} bytes is too short", offset=0)
    beg = 1
    payload = b""
    n = flags & SIZE_MASK
    if n:
        if beg + n > end:
            raise InvalidPayload(f"{n}-byte size field runs past byte {end}", offset=beg)
        size = int.from_bytes(raw[beg : beg + n], "little")
        beg += n
        if beg + size > end:
            raise InvalidPayload(f"declared payload of {size} bytes runs past byte {end}", offset=1)
        payload = raw[beg : beg + size]
        beg += size
    padding = raw[beg:end]
    if not signed:
        return Message(payload=payload, padding=padding, signature=None, signer=None, raw=raw)
    signature = raw[end:]
    try:
        signer = secp.recover_public_key(keccak256(raw[:end]), signature)
    except InvalidSignature as err:
        raise InvalidPayload(f"bad message signature: {err.message}", offset=end) from err
    return Message(payload=payload, padding=padding, signature=signature, signer=signer, raw=raw)


def seal_symmetric(
    payload: bytes, key: bytes, *, signing_key: bytes | None = None, padding: bytes | None = None
) -> bytes:
    """Build a message and encrypt it with AES-256-GCM; return the envelope ``Data`` (geth ``Wrap``)."""
    return symmetric.encrypt(key, build(payload, signing_key=signing_key, padding=padding))


def open_symmetric(data: bytes, key: bytes) -> Message:
    """Decrypt envelope ``Data`` with a symmetric key and parse it (DecryptionFailed / InvalidPayload)."""
    return parse(symmetric.decrypt(key, data))


def seal_asymmetric(
    payload: bytes, pub: bytes, *, signing_key: bytes | None = None, padding: bytes | None = None
) -> bytes:
    """Build a message and ECIES-encrypt it to ``pub`` (no shared data, geth ``encryptAsymmetric``)."""
    return ecies.encrypt(pub, build(payload, signing_key=signing_key, padding=padding))


def open_asymmetric(data: bytes, priv: bytes) -> Message:
    """ECIES-decrypt envelope ``Data`` with a private key and parse it (DecryptionFailed / InvalidPayload)."""
    return parse(ecies.decrypt(priv, data))
