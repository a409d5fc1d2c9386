"""Errors raised by the Waku codecs.

Every decoder in this package raises a subclass of :class:`CodecError` on bad input — never an
``IndexError``, ``ValueError`` or ``struct.error`` — so callers at a boundary (the devp2p peer, the ingest
service) can catch one type and translate it (``raise X from err``)::

    CodecError
    ├── MalformedRLP          bytes that are not canonical RLP, or the wrong shape
    ├── SizeLimitExceeded     input larger than the caller's limit (checked before allocation)
    ├── InvalidEnvelope       RLP that is not a valid ``[Expiry, TTL, Topic, Data, Nonce]`` envelope
    ├── InvalidTopic          a topic or content topic that cannot be parsed
    ├── InvalidPayload        a Whisper message payload that does not parse (flags, size, padding)
    ├── DecryptionFailed      AES-GCM / ECIES opening failed (wrong key or tampered data)
    ├── InvalidSignature      a signature that is malformed or does not recover a key
    ├── InvalidKey            a private key, public key or symmetric key that cannot be used
    ├── InvalidRequest        a mailserver history request in no known dialect, or out of bounds
    └── InvalidResponse       a 0x7f / 0x7d payload that does not parse
"""

from __future__ import annotations


class CodecError(Exception):
    """Base class of every error raised by :mod:`wakucodec`."""

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message if offset is None else f"{message} (at byte {offset})")
        self.message = message
        #: Byte offset in the input where the problem was found, when known.
        self.offset = offset


class MalformedRLP(CodecError):
    """Input is not canonical RLP, has trailing bytes, or does not have the expected shape."""


class SizeLimitExceeded(CodecError):
    """Input (or a length it declares) exceeds the configured limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes, limit is {limit}")
        self.size = size
        self.limit = limit


class InvalidEnvelope(CodecError):
    """Well-formed RLP that is not a valid Waku/Whisper envelope."""


class InvalidTopic(CodecError):
    """A 4-byte topic or a content topic string that cannot be parsed."""


class InvalidPayload(CodecError):
    """A Whisper v6 message payload (the plaintext inside ``Data``) that does not parse."""


class DecryptionFailed(CodecError):
    """Symmetric or asymmetric decryption failed: wrong key, or the data was tampered with."""


class InvalidSignature(CodecError):
    """A signature that is malformed or from which no public key can be recovered."""


class InvalidKey(CodecError):
    """A secp256k1 private/public key or an AES key that is malformed or not allowed for the operation."""


class InvalidRequest(CodecError):
    """A mailserver history request that matches no known dialect or violates its bounds."""


class InvalidResponse(CodecError):
    """A mailserver response payload (0x7f / 0x7d) that does not parse."""
