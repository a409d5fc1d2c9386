"""Request validation and the write-side integrity check, on plain values (no gRPC, no protos).

Field checks raise :class:`~services.archive.errors.InvalidField` / ``LimitExceeded`` / ``InvalidRange`` whose
message starts with the field path, so a caller can tell exactly what to fix. :func:`check_envelope` is the
integrity gate of PutEnvelopes: an envelope is archived only when its decoded fields, its hash and its sent
time all agree with its RLP, so the archive never stores a row whose key lies.
"""

from __future__ import annotations

from dataclasses import dataclass

from archivestore.types import StoredEnvelope
from services.archive.errors import InvalidField, InvalidRange, LimitExceeded
from wakucodec.constants import BLOOM_SIZE, TOPIC_LENGTH, UINT32_MAX
from wakucodec.envelope import decode_envelope
from wakucodec.errors import CodecError

__all__ = [
    "HASH_LEN",
    "MAX_DETAIL_BYTES",
    "CheckedEnvelope",
    "EnvelopeFields",
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


@dataclass(frozen=True, slots=True)
class EnvelopeFields:
    """The fields of a PutItem as the caller sent them (``Envelope`` proto minus ``data`` and ``pow``)."""

    rlp: bytes
    hash: bytes
    expiry: int
    ttl: int
    topic: bytes
    nonce: int
    sent: int
    message_hash: bytes


@dataclass(frozen=True, slots=True)
class CheckedEnvelope:
    """An envelope that passed :func:`check_envelope`: ready to store, plus its Go ``Size()``."""

    envelope: StoredEnvelope
    size: int  # 20 + len(Data), the figure status-go's size histogram is built on


def clip_detail(text: str) -> str:
    """``text`` cut to at most 256 bytes of UTF-8 (PutResult.detail's bound), marked with an ellipsis."""
    raw = text.encode()
    return (
        text if len(raw) <= MAX_DETAIL_BYTES else raw[: MAX_DETAIL_BYTES - 3].decode(errors="ignore") + "..."
    )


def check_envelope(item: EnvelopeFields, *, max_size: int) -> CheckedEnvelope | str:
    """The envelope to store, or why it must not be stored (a PutResult.detail, at most 256 bytes).

    Checks, in order: the RLP is present and a canonical 5-item Waku envelope no larger than ``max_size``
    (Go ``size()``: 20 + len(Data)); ``hash == keccak256(rlp)``; expiry, ttl, topic and nonce equal the RLP's;
    ``sent == expiry - ttl`` (with ``ttl <= expiry``, so it is not Go's uint32 wrap-around); the message hash
    is empty or 32 bytes. ``data`` and ``pow`` are not checked: the archive stores the RLP and recomputes both
    from it on every read.
    """
    if not item.rlp:
        return "envelope.rlp: required"
    if len(item.hash) != HASH_LEN:
        return clip_detail(f"envelope.hash: must be {HASH_LEN} bytes, got {len(item.hash)}")
    if len(item.rlp) > max_size + RLP_OVERHEAD:
        return clip_detail(
            f"envelope.rlp: {len(item.rlp)} bytes is more than an envelope of size {max_size} takes"
        )
    try:
        decoded = decode_envelope(item.rlp, max_size=max_size + RLP_OVERHEAD)
    except CodecError as err:
        return clip_detail(f"envelope.rlp: not a canonical Waku envelope: {err}")
    if decoded.size > max_size:
        return clip_detail(f"envelope.rlp: envelope size {decoded.size} (20 + len(Data)) exceeds {max_size}")
    if decoded.hash != item.hash:
        return clip_detail(f"envelope.hash: is not keccak256(rlp) (that is 0x{decoded.hash.hex()})")
    for name, given, actual in (
        ("expiry", item.expiry, decoded.expiry),
        ("ttl", item.ttl, decoded.ttl),
        ("nonce", item.nonce, decoded.nonce),
    ):
        if given != actual:
            return clip_detail(f"envelope.{name}: {given} disagrees with the rlp ({actual})")
    if item.topic != decoded.topic:
        return clip_detail(
            f"envelope.topic: 0x{item.topic.hex()} disagrees with the rlp (0x{decoded.topic.hex()})"
        )
    if decoded.ttl > decoded.expiry:
        return clip_detail(
            f"envelope.ttl: {decoded.ttl} exceeds expiry {decoded.expiry}, so sent would be negative"
        )
    if item.sent != decoded.expiry - decoded.ttl:
        return clip_detail(f"envelope.sent: {item.sent} is not expiry - ttl ({decoded.expiry - decoded.ttl})")
    if len(item.message_hash) not in (0, HASH_LEN):
        return clip_detail(f"message_hash: must be empty or {HASH_LEN} bytes, got {len(item.message_hash)}")
    assert 0 <= item.sent <= UINT32_MAX
    stored = StoredEnvelope(
        sent=item.sent,
        hash=item.hash,
        topic=decoded.topic,
        expiry=decoded.expiry,
        raw=item.rlp,
        message_hash=item.message_hash or None,
    )
    return CheckedEnvelope(stored, decoded.size)
