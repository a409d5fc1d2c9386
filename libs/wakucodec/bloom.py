"""Topic → bloom filter, bloom matching, and topic conversions (docs/protocol-notes.md §1.4, §7.2).

A bloom is 64 bytes (512 bits). A topic sets at most three bits; a node's bloom is the bytewise OR of the
blooms of the topics it is interested in, and an envelope is forwarded to / accepted by a node when the
envelope's bloom is a subset of the node's.

**Quirk kept on purpose:** go-ethereum and status-go *assign* each byte (``b[byteIndex] = 1 << bitIndex``)
instead of OR-ing into it, so when two of a topic's three indices land in the same byte only the last one
survives (topic ``01020300`` → byte 0 = ``0x08``, not ``0x0e``). Nim and the spec pseudocode OR. Requests and
status packets built by status-go use the Go form, so :func:`topic_to_bloom` does too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from wakucodec.constants import BLOOM_SIZE, TOPIC_LENGTH
from wakucodec.errors import InvalidTopic

__all__ = [
    "EMPTY_BLOOM",
    "FULL_BLOOM",
    "bloom_match",
    "bytes_to_topic",
    "is_full_bloom",
    "topic_from_hex",
    "topic_to_bloom",
    "topic_to_hex",
    "topics_to_bloom",
]

#: The bloom of a full node: every bit set, matches every envelope (G920 ``MakeFullNodeBloom``).
FULL_BLOOM: bytes = b"\xff" * BLOOM_SIZE
#: The all-zero bloom: interested in nothing (RFC6); also what an empty topic list ORs to.
EMPTY_BLOOM: bytes = bytes(BLOOM_SIZE)

_FULL_INT = (1 << (8 * BLOOM_SIZE)) - 1
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def topic_to_bloom(topic: bytes | bytearray | memoryview) -> bytes:
    """Return the 64-byte bloom of a 4-byte topic using Go's assignment rule (G920 / SG ``TopicToBloom``).

    For ``j`` in 0..2 the index is ``topic[j]``, plus 256 when bit ``j`` of ``topic[3]`` is set; then
    ``bloom[index // 8] = 1 << (index % 8)`` — an assignment, so a later index in the same byte replaces an
    earlier one. Raises :class:`~wakucodec.errors.InvalidTopic` unless ``topic`` is 4 bytes.
    """
    return _topic_to_bloom(topic if type(topic) is bytes else bytes(topic))


@functools.lru_cache(maxsize=4096)  # a mailserver sees few distinct topics; the result is immutable
def _topic_to_bloom(topic: bytes) -> bytes:
    if len(topic) != TOPIC_LENGTH:
        raise InvalidTopic(f"topic must be {TOPIC_LENGTH} bytes, got {len(topic)}")
    bloom = bytearray(BLOOM_SIZE)
    high = topic[3]
    for j in range(3):
        index = topic[j] + (256 if high & (1 << j) else 0)
        bloom[index >> 3] = 1 << (index & 7)  # '=' not '|=': the Go quirk (§1.4)
    return bytes(bloom)


def topics_to_bloom(topics: Iterable[bytes | bytearray | memoryview]) -> bytes:
    """Return the bytewise OR of the Go blooms of ``topics``; no topics → :data:`EMPTY_BLOOM`.

    Same result as status-go ``services/ext/api.go`` ``topicsToBloom`` (a big.Int OR, left-padded to 64
    bytes).
    """
    acc = 0
    for topic in topics:
        acc |= int.from_bytes(topic_to_bloom(topic), "big")
    return acc.to_bytes(BLOOM_SIZE, "big")


def bloom_match(filter: bytes | None, sample: bytes) -> bool:
    """Return True when every bit of ``sample`` is also set in ``filter`` (G920 / SG ``BloomFilterMatch``).

    ``filter`` None or empty means "no filter / full node" and matches everything — Go's nil check, and
    status-go treats a zero-length bloom option as a full node (SG ``IsFullNode``). Otherwise both must be
    64 bytes; the per-byte Go loop ``(f | s) == f`` is done as one big-integer operation.
    """
    if not filter:
        return True
    if len(filter) != BLOOM_SIZE or len(sample) != BLOOM_SIZE:
        raise ValueError(f"blooms must be {BLOOM_SIZE} bytes, got {len(filter)} and {len(sample)}")
    f = int.from_bytes(filter, "big")
    return (f | int.from_bytes(sample, "big")) == f


def is_full_bloom(bloom: bytes | None) -> bool:
    """Return True for a bloom meaning "accept everything": None, empty or all ``0xff`` (SG IsFullNode)."""
    if not bloom:
        return True
    return len(bloom) == BLOOM_SIZE and int.from_bytes(bloom, "big") == _FULL_INT


def bytes_to_topic(data: bytes | bytearray | memoryview) -> bytes:
    """Return the first 4 bytes of ``data``, zero-padded on the right if shorter (SG ``BytesToTopic``)."""
    return bytes(data[:TOPIC_LENGTH]).ljust(TOPIC_LENGTH, b"\x00")


def topic_to_hex(topic: bytes) -> str:
    """Return ``0x`` + 8 lowercase hex digits, like Go's ``TopicType.String`` (``hexutil.Encode``)."""
    if len(topic) != TOPIC_LENGTH:
        raise InvalidTopic(f"topic must be {TOPIC_LENGTH} bytes, got {len(topic)}")
    return "0x" + topic.hex()


def topic_from_hex(text: str) -> bytes:
    """Parse ``"0xf26e7779"`` into 4 bytes, as strictly as Go's ``TopicType.UnmarshalText``.

    ``hexutil.UnmarshalFixedText`` requires the ``0x``/``0X`` prefix and exactly 8 hex digits (either case);
    anything else raises :class:`~wakucodec.errors.InvalidTopic` (SG ``waku/common/topic_test.go``).
    """
    if len(text) < 2 or text[0] != "0" or text[1] not in "xX":
        raise InvalidTopic(f"topic {text!r:.40} lacks the 0x prefix")
    digits = text[2:]
    if len(digits) != 2 * TOPIC_LENGTH or not _HEX_DIGITS.issuperset(digits):
        raise InvalidTopic(f"topic {text!r:.40} is not 0x + {2 * TOPIC_LENGTH} hex digits")
    return bytes.fromhex(digits)
