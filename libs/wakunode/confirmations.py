"""Message confirmations (protocol-notes §3.6): Message Response (12) and Batch Ack (11).

A node with confirmations enabled answers every Messages packet with a Message Response and then a Batch Ack
(SG ``waku/v1/peer.go`` ``sendConfirmation``), both naming the batch by
``batchHash = keccak256(raw Messages payload)``:

- Batch Ack payload: the 32-byte hash as an RLP string;
- Message Response payload: ``[1, [batchHash, [[envelopeHash, code, description], …]]]``; receivers
  ignore versions other than 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wakucodec import rlp
from wakucodec.errors import CodecError, MalformedRLP
from wakucodec.keccak import keccak256
from wakucodec.validation import Verdict
from wakunode.constants import ENVELOPE_OTHER_ERROR, ENVELOPE_TIME_NOT_SYNCED, MESSAGE_RESPONSE_VERSION

__all__ = [
    "EnvelopeError",
    "MessageResponse",
    "batch_hash",
    "decode_batch_ack",
    "decode_message_response",
    "encode_batch_ack",
    "encode_message_response",
    "envelope_error",
]

_HASH = 32


def batch_hash(messages_payload: bytes) -> bytes:
    """``keccak256`` of the raw Messages packet payload (status-go ``crypto.Keccak256Hash(data)``)."""
    return keccak256(messages_payload)


@dataclass(frozen=True, slots=True)
class EnvelopeError:
    """One rejected envelope in a Message Response (status-go ``EnvelopeError``)."""

    envelope_hash: bytes
    """The envelope's 32-byte hash."""
    code: int
    """``ENVELOPE_TIME_NOT_SYNCED`` (21) or ``ENVELOPE_OTHER_ERROR`` (22) as status-go numbers them."""
    description: str
    """The error text."""


@dataclass(frozen=True, slots=True)
class MessageResponse:
    """A decoded version-1 Message Response."""

    batch_hash: bytes
    """Hash of the acknowledged Messages payload."""
    errors: tuple[EnvelopeError, ...]
    """Per-envelope errors; empty when every envelope was accepted."""


def envelope_error(envelope_hash: bytes, verdict: Verdict) -> EnvelopeError:
    """status-go ``ErrorToEnvelopeError``: time-sync faults get code 21, everything else 22."""
    fault = verdict.fault
    code = ENVELOPE_TIME_NOT_SYNCED if fault is not None and fault.time_sync else ENVELOPE_OTHER_ERROR
    return EnvelopeError(envelope_hash, code, verdict.message)


def encode_message_response(hash_: bytes, errors: Sequence[EnvelopeError]) -> bytes:
    """Encode ``[1, [batchHash, [[envHash, code, description], …]]]``."""
    items: list[rlp.Encodable] = [[e.envelope_hash, e.code, e.description.encode("utf-8")] for e in errors]
    return rlp.encode([MESSAGE_RESPONSE_VERSION, [hash_, items]])


def decode_message_response(payload: bytes) -> MessageResponse | None:
    """Decode a Message Response; None for a version we do not know (ignored, as status-go does).

    Raises :class:`~wakucodec.errors.MalformedRLP` when it does not parse.
    """
    item = rlp.decode(payload)
    if not isinstance(item, list) or len(item) != 2:
        raise MalformedRLP("message response must be [version, response]")
    if rlp.to_uint(item[0], 64, "version") != MESSAGE_RESPONSE_VERSION:
        return None
    body = item[1]
    if (
        not isinstance(body, list)
        or len(body) != 2
        or not isinstance(body[0], bytes)
        or len(body[0]) != _HASH
    ):
        raise MalformedRLP("message response must carry [batchHash, errors]")
    errors_item = body[1]
    if not isinstance(errors_item, list):
        raise MalformedRLP("message response errors must be a list")
    errors = []
    for entry in errors_item:
        if not isinstance(entry, list) or len(entry) != 3:
            raise MalformedRLP("envelope error must be [hash, code, description]")
        env_hash, code, text = entry
        if not isinstance(env_hash, bytes) or not isinstance(text, bytes):
            raise MalformedRLP("envelope error hash and description must be strings")
        errors.append(EnvelopeError(env_hash, rlp.to_uint(code, 64, "code"), text.decode("utf-8", "replace")))
    return MessageResponse(body[0], tuple(errors))


def encode_batch_ack(hash_: bytes) -> bytes:
    """Encode a Batch Ack: the 32-byte batch hash as an RLP string."""
    return rlp.encode(hash_)


def decode_batch_ack(payload: bytes) -> bytes:
    """Decode a Batch Ack; :class:`~wakucodec.errors.MalformedRLP` unless it is a 32-byte string."""
    try:
        item = rlp.decode(payload)
    except CodecError as err:
        raise MalformedRLP(f"batch ack: {err.message}") from err
    if not isinstance(item, bytes) or len(item) != _HASH:
        raise MalformedRLP("batch ack must be a 32-byte string")
    return item
