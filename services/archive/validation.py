"""Request validation and the write-side integrity check, on plain values (no gRPC, no protos).

Field checks raise :class:`~services.archive.errors.InvalidField` / ``LimitExceeded`` / ``InvalidRange`` whose
message starts with the field path, so a caller can tell exactly what to fix. :func:`check_envelope` is the
integrity gate of PutEnvelopes: an envelope is archived only when its RLP is a canonical envelope and its
hash is the RLP's Keccak; the row's key columns are read from that RLP, so the archive never stores a key
that lies.
"""

from __future__ import annotations

from typing import NamedTuple

from archivestore.types import StoredEnvelope
from meshcore.protoconv import clip_utf8
from services.archive.errors import InvalidField, InvalidRange, LimitExceeded
from wakucodec.constants import BLOOM_SIZE, TOPIC_LENGTH, UINT32_MAX
from wakucodec.envelope import decode_envelope
from wakucodec.errors import CodecError

__all__ = [
    "HASH_LEN",
    "MAX_DETAIL_BYTES",
    "CheckedEnvelope",
    "check_bloom",
    "check_count",
    "check_envelope",
    "check_hash",
    "check_position_hash",
    "check_range",
    "check_topic",
    "clip_detail",
]

HASH_LEN = 32
#: Bytes of RLP around an envelope's Data beyond Go's 20-byte header count (list and item headers).
RLP_OVERHEAD = 64
#: PutResult.detail is at most 256 bytes.
MAX_DETAIL_BYTES = 256


def check_hash(field: str, value: bytes) -> bytes:
    """``value`` if it is a 32-byte hash."""
    if len(value) != HASH_LEN:
        raise InvalidField(field, f"must be {HASH_LEN} bytes, got {len(value)}")
    return value


def check_position_hash(field: str, value: bytes) -> bytes:
    """A resume position's hash: 1 to 32 bytes; a shorter one is a prefix (a 36-byte cursor carries 16)."""
    if not 1 <= len(value) <= HASH_LEN:
        raise InvalidField(
            field, f"must be 1 to {HASH_LEN} bytes (a shorter hash is a prefix), got {len(value)}"
        )
    return value


def check_topic(field: str, value: bytes) -> bytes:
    """``value`` if it is a 4-byte topic."""
    if len(value) != TOPIC_LENGTH:
        raise InvalidField(field, f"must be {TOPIC_LENGTH} bytes, got {len(value)}")
    return value


def check_bloom(field: str, value: bytes) -> bytes:
    """``value`` if it is empty or a 64-byte bloom filter."""
    if len(value) not in (0, BLOOM_SIZE):
        raise InvalidField(field, f"must be empty or {BLOOM_SIZE} bytes, got {len(value)}")
    return value


def check_count(field: str, count: int, low: int, high: int, what: str = "items") -> int:
    """``count`` if ``low <= count <= high``; LIMIT_EXCEEDED otherwise."""
    if not low <= count <= high:
        raise LimitExceeded(field, f"must hold {low} to {high} {what}, got {count}")
    return count


def check_range(field: str, lower: int, upper: int) -> tuple[int, int]:
    """An inclusive sent-time range with ``lower <= upper``."""
    if lower > upper:
        raise InvalidRange(field, lower, upper)
    return lower, upper


class CheckedEnvelope(NamedTuple):
    """An envelope that passed :func:`check_envelope`: ready to store, plus its Go ``Size()``.

    A NamedTuple rather than a frozen dataclass: it is built once per archived envelope, on the write path.
    """

    envelope: StoredEnvelope
    size: int  # 20 + len(Data), the figure status-go's size histogram is built on


def clip_detail(text: str) -> str:
    """``text`` cut to at most 256 bytes of UTF-8 (PutResult.detail's bound), marked with an ellipsis."""
    return clip_utf8(text, MAX_DETAIL_BYTES)


def check_envelope(
    rlp: bytes, envelope_hash: bytes, message_hash: bytes, *, max_size: int
) -> CheckedEnvelope | str:
    """A PutItem's ``rlp``, ``hash`` and ``message_hash`` as a row to store, or why not (a PutResult.detail).

    Checks, in order: the RLP is present, the hash is 32 bytes; the RLP is a canonical 5-item Waku envelope
    no larger than ``max_size`` (Go ``size()``: 20 + len(Data)); ``hash == keccak256(rlp)``; ``ttl <= expiry``
    (so the sent time ``expiry - ttl`` is not Go's uint32 wrap-around); the message hash is empty or 32 bytes.
    The key columns (sent, topic, expiry) come from the RLP, so they cannot disagree with it.

    One strict decode does it all, Keccak included: the whole RLP must be canonical (not only its header),
    because FULL and NO_DATA reads decode the stored bytes again and history forwards them to peers whose
    Go decoder refuses anything else. Keccak is half of the decode's cost, and the hash must be verified
    anyway; a header-only parse would save little more than the copy of ``Data``. A detail is at most 256
    bytes.
    """
    if not rlp:
        return "rlp: required"
    if len(envelope_hash) != HASH_LEN:
        return clip_detail(f"hash: must be {HASH_LEN} bytes, got {len(envelope_hash)}")
    if len(rlp) > max_size + RLP_OVERHEAD:
        return clip_detail(f"rlp: {len(rlp)} bytes is more than an envelope of size {max_size} takes")
    try:
        decoded = decode_envelope(rlp, max_size=max_size + RLP_OVERHEAD)
    except CodecError as err:
        return clip_detail(f"rlp: not a canonical Waku envelope: {err}")
    if decoded.size > max_size:
        return clip_detail(f"rlp: envelope size {decoded.size} (20 + len(Data)) exceeds {max_size}")
    if decoded.hash != envelope_hash:
        return clip_detail(f"hash: is not keccak256(rlp) (that is 0x{decoded.hash.hex()})")
    if decoded.ttl > decoded.expiry:
        return clip_detail(
            f"rlp: ttl {decoded.ttl} exceeds expiry {decoded.expiry}, so sent would be negative"
        )
    if len(message_hash) not in (0, HASH_LEN):
        return clip_detail(f"message_hash: must be empty or {HASH_LEN} bytes, got {len(message_hash)}")
    sent = decoded.expiry - decoded.ttl
    assert 0 <= sent <= UINT32_MAX
    stored = StoredEnvelope(
        sent=sent,
        hash=envelope_hash,
        topic=decoded.topic,
        expiry=decoded.expiry,
        raw=rlp,
        message_hash=message_hash or None,
    )
    return CheckedEnvelope(stored, decoded.size)
