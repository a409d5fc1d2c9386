"""Strict, canonical, size-bounded RLP (Ethereum Yellow Paper, appendix B).

Why our own codec rather than pyrlp: every decoder here must reject non-canonical input exactly like
go-ethereum's ``rlp`` package does (docs/protocol-notes.md §1.1 — geth hashes the raw received bytes,
which only equals the hash of our re-encoding if non-canonical forms are refused), must check sizes before it
allocates, and must raise :class:`~wakucodec.errors.MalformedRLP` instead of ``IndexError``. pyrlp is kept as
a test oracle (tests/unit/wakucodec/test_rlp.py).

Decoded items are ``bytes`` (strings) or ``list`` (lists) — never ints: integer fields are converted by the
caller with :func:`to_uint`, which enforces Go's canonical-integer and overflow rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from wakucodec.errors import MalformedRLP, SizeLimitExceeded

__all__ = [
    "Item",
    "decode",
    "encode",
    "encode_uint",
    "split_list",
    "to_bool",
    "to_uint",
]

#: A decoded RLP item: a byte string or a list of items.
Item: TypeAlias = "bytes | list[Item]"
#: What :func:`encode` accepts: items, plus non-negative ints encoded as canonical big-endian strings.
Encodable: TypeAlias = "bytes | bytearray | int | Sequence[Encodable]"

_MAX_DEPTH = 32  # deep enough for every structure in the protocols; bounds recursion on hostile input


def encode_uint(value: int) -> bytes:
    """Return the canonical RLP encoding of a non-negative integer (0 → ``0x80``)."""
    if value < 0:
        raise ValueError("RLP cannot encode negative integers")
    if value < 0x80:
        return b"\x80" if value == 0 else bytes((value,))
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return _header(len(raw), 0x80) + raw


def _header(length: int, offset: int) -> bytes:
    if length <= 55:
        return bytes((offset + length,))
    len_bytes = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes((offset + 55 + len(len_bytes),)) + len_bytes


def encode(item: Encodable) -> bytes:
    """RLP-encode bytes, non-negative ints and (nested) lists/tuples of them."""
    if isinstance(item, (bytes, bytearray)):
        if len(item) == 1 and item[0] < 0x80:
            return bytes(item)
        return _header(len(item), 0x80) + bytes(item)
    if isinstance(item, bool):  # bool is an int subclass; refuse the ambiguity
        raise TypeError("encode bools explicitly as b'\\x01' / b''")
    if isinstance(item, int):
        return encode_uint(item)
    if isinstance(item, Sequence) and not isinstance(item, str):
        payload = b"".join(encode(x) for x in item)
        return _header(len(payload), 0xC0) + payload
    raise TypeError(f"cannot RLP-encode {type(item).__name__}")


def _read_header(data: bytes, pos: int, end: int) -> tuple[bool, int, int]:
    """Parse the header at ``pos``; return (is_list, payload_start, payload_end), canonical form enforced."""
    if pos >= end:
        raise MalformedRLP("unexpected end of input", offset=pos)
    prefix = data[pos]
    if prefix < 0x80:  # a single byte is its own encoding
        return False, pos, pos + 1
    if prefix <= 0xB7:
        length = prefix - 0x80
        start = pos + 1
        if length == 1 and start < end and data[start] < 0x80:
            raise MalformedRLP("single byte below 0x80 must not have a string prefix", offset=pos)
        is_list = False
    elif prefix <= 0xBF:
        start, length = _long_length(data, pos, end, prefix - 0xB7)
        is_list = False
    elif prefix <= 0xF7:
        length = prefix - 0xC0
        start = pos + 1
        is_list = True
    else:
        start, length = _long_length(data, pos, end, prefix - 0xF7)
        is_list = True
    stop = start + length
    if stop > end:
        raise MalformedRLP(f"item declares {length} bytes, only {max(end - start, 0)} remain", offset=pos)
    return is_list, start, stop


def _long_length(data: bytes, pos: int, end: int, len_of_len: int) -> tuple[int, int]:
    start = pos + 1 + len_of_len
    if start > end:
        raise MalformedRLP("truncated length prefix", offset=pos)
    if data[pos + 1] == 0:
        raise MalformedRLP("length prefix has leading zero bytes", offset=pos)
    length = int.from_bytes(data[pos + 1 : start], "big")
    if length <= 55:
        raise MalformedRLP("long form used for a length <= 55", offset=pos)
    return start, length


def _decode_at(data: bytes, pos: int, end: int, depth: int) -> tuple[Item, int]:
    is_list, start, stop = _read_header(data, pos, end)
    if not is_list:
        return data[start:stop], stop
    if depth >= _MAX_DEPTH:
        raise MalformedRLP(f"nesting deeper than {_MAX_DEPTH}", offset=pos)
    items: list[Item] = []
    cursor = start
    while cursor < stop:
        child, cursor = _decode_at(data, cursor, stop, depth + 1)
        items.append(child)
    return items, stop


def decode(data: bytes, *, max_size: int | None = None) -> Item:
    """Decode exactly one canonical RLP item spanning all of ``data``.

    Raises :class:`MalformedRLP` on non-canonical encodings, truncation or trailing bytes, and
    :class:`SizeLimitExceeded` when ``len(data) > max_size`` (checked before any parsing).
    """
    data = bytes(data)
    if max_size is not None and len(data) > max_size:
        raise SizeLimitExceeded("RLP input", len(data), max_size)
    item, stop = _decode_at(data, 0, len(data), 0)
    if stop != len(data):
        raise MalformedRLP(f"{len(data) - stop} trailing bytes after the RLP item", offset=stop)
    return item


def split_list(data: bytes, *, max_size: int | None = None, max_items: int | None = None) -> list[bytes]:
    """Split a top-level RLP list into the exact raw encodings of its elements.

    Only the element headers are checked (canonically); each element's body is left for the caller to
    decode. Used where the raw bytes matter — an envelope's hash is keccak256 of the bytes as received
    (docs/protocol-notes.md §1.2).
    """
    data = bytes(data)
    if max_size is not None and len(data) > max_size:
        raise SizeLimitExceeded("RLP list", len(data), max_size)
    is_list, start, stop = _read_header(data, 0, len(data))
    if not is_list:
        raise MalformedRLP("expected an RLP list, found a string", offset=0)
    if stop != len(data):
        raise MalformedRLP(f"{len(data) - stop} trailing bytes after the RLP list", offset=stop)
    out: list[bytes] = []
    cursor = start
    while cursor < stop:
        _, _, child_stop = _read_header(data, cursor, stop)
        out.append(data[cursor:child_stop])
        cursor = child_stop
        if max_items is not None and len(out) > max_items:
            raise SizeLimitExceeded("RLP list item count", len(out), max_items)
    return out


def to_uint(item: Item, bits: int, what: str = "integer") -> int:
    """Convert a decoded string item to an unsigned int under Go's rules: no leading zeros, fits ``bits``."""
    if not isinstance(item, bytes):
        raise MalformedRLP(f"{what}: expected an RLP string, found a list")
    if item[:1] == b"\x00":
        raise MalformedRLP(f"{what}: non-canonical integer (leading zero byte)")
    if len(item) * 8 > bits:
        raise MalformedRLP(f"{what}: {len(item)}-byte value overflows uint{bits}")
    return int.from_bytes(item, "big")


def to_bool(item: Item, what: str = "bool") -> bool:
    """Convert a decoded item to a bool as Go's RLP does: ``0x80`` → False, ``0x01`` → True, else error."""
    if item == b"":
        return False
    if item == b"\x01":
        return True
    raise MalformedRLP(f"{what}: invalid boolean encoding {item!r:.20}")
