"""Wire codecs for every history-request dialect, and the rule that tells them apart.

Per dialect (docs/protocol-notes.md §4.1, §4.12, §9 item 6)::

    STATUS_PLAIN     0x7e payload    [ID, From, To, Limit, Cursor, Bloom, Topics]
    STATUS_ENVELOPE  envelope data   [Lower, Upper, Bloom, Topics, Limit, Cursor, Batch]
    STATUS_LEGACY_6  envelope data   [Lower, Upper, Bloom, Limit, Cursor, Batch]
    SPEC_6_TOPICS    envelope data   [lower, upper, bloom, limit, cursor, topics]
    SPEC_5           envelope data   [Lower, Upper, Bloom, Limit, Cursor]
    GETH_BINARY      envelope data   Lower(4) ‖ Upper(4) ‖ [Bloom(64)] ‖ [Limit(4)] ‖ [Cursor(36)], BE ints

Disambiguation of a decrypted envelope payload (:func:`detect_payload_dialect`) is deterministic and by
shape only; the chosen dialect is then decoded strictly (no second guess):

1. If the bytes are one canonical RLP **list** spanning the whole payload: 7 items with a list 4th →
   STATUS_ENVELOPE; 6 items with a list last → SPEC_6_TOPICS; 6 items with a string last (the ``Batch``
   bool) → STATUS_LEGACY_6; 5 items → SPEC_5; anything else → :class:`InvalidRequest`.
2. Otherwise the payload is binary: exactly 8, 72, 76 or 112 bytes → GETH_BINARY; any other length →
   :class:`InvalidRequest` (``< 8``: "Undersized p2p request"; ``9..71``: "Undersized bloom filter in p2p
   request", status-go's texts).

RLP wins a tie: ``[0, 0, bloom(64), 0, ""]`` is 72 bytes, and a real binary payload can only parse as an
RLP list if its first byte is ``>= 0xc0`` (``Lower >= 0xc0000000``, the year 2072); our encoder never
produces a tie (it takes the next longer binary form). geth and status-go accept binary payloads with
trailing bytes (73-75, 77-111, > 112 bytes) and read what they can; we accept only the four lengths real
clients produce.

``Batch`` has no field outside the status-go envelope forms; decoders set what the dialect implies: True
for STATUS_PLAIN (status-go's ``Deliver`` sets ``Batch: true``) and the spec forms (the specs answer with
an *array* of envelopes), False for GETH_BINARY (geth sends one envelope per 0x7f; status-go's binary path
left ``Batch`` false). Encoders ignore ``batch`` where it has no field; fields that change *what* is
returned (topics, cursor, limit) must be expressible in the dialect or the encoder raises
:class:`InvalidRequest`.
"""

from __future__ import annotations

from wakucodec import rlp
from wakucodec.bloom import FULL_BLOOM
from wakucodec.constants import BLOOM_SIZE
from wakucodec.errors import InvalidRequest, MalformedRLP
from wakucodec.historyrequest import CURSOR_LENGTH, Dialect, HistoryRequest

__all__ = [
    "GETH_BINARY_LENGTHS",
    "decode_payload",
    "decode_plain",
    "detect_payload_dialect",
    "encode_payload",
    "encode_plain",
    "implied_batch",
]

_TIME_RANGE = 8  # Lower(4) ‖ Upper(4)
_WITH_BLOOM = _TIME_RANGE + BLOOM_SIZE  # 72
_WITH_LIMIT = _WITH_BLOOM + 4  # 76
_WITH_CURSOR = _WITH_LIMIT + CURSOR_LENGTH  # 112
#: The binary payload lengths accepted (protocol-notes §4.1 C, §4.12).
GETH_BINARY_LENGTHS = frozenset({_TIME_RANGE, _WITH_BLOOM, _WITH_LIMIT, _WITH_CURSOR})

_RLP_FIELD_COUNT = {
    Dialect.STATUS_ENVELOPE: 7,
    Dialect.STATUS_LEGACY_6: 6,
    Dialect.SPEC_6_TOPICS: 6,
    Dialect.SPEC_5: 5,
}


def implied_batch(dialect: Dialect) -> bool:
    """The ``batch`` value a decoded request gets in dialects without a ``Batch`` field (see module doc)."""
    return dialect is not Dialect.GETH_BINARY


# --------------------------------------------------------------------------------------------- encoding


def _bool(value: bool) -> bytes:
    return b"\x01" if value else b""  # Go RLP: true = 0x01, false = 0x80


def encode_payload(req: HistoryRequest, dialect: Dialect) -> bytes:
    """Encode the plaintext an envelope dialect carries inside its sealed ``Data``.

    Raises :class:`InvalidRequest` when ``req`` uses a field the dialect cannot carry, and for
    :attr:`Dialect.STATUS_PLAIN` (use :func:`encode_plain`, it needs an ID).
    """
    bloom = req.bloom or b""
    topics = req.topics
    if dialect is Dialect.STATUS_ENVELOPE:
        return rlp.encode([req.lower, req.upper, bloom, topics, req.limit, req.cursor, _bool(req.batch)])
    if dialect is Dialect.SPEC_6_TOPICS:
        return rlp.encode([req.lower, req.upper, bloom, req.limit, req.cursor, topics])
    if dialect is Dialect.STATUS_PLAIN:
        raise InvalidRequest("STATUS_PLAIN is not an envelope payload; use encode_plain")
    if req.topics:
        raise InvalidRequest(f"{dialect.name} requests cannot carry topics")
    if dialect is Dialect.STATUS_LEGACY_6:
        return rlp.encode([req.lower, req.upper, bloom, req.limit, req.cursor, _bool(req.batch)])
    if dialect is Dialect.SPEC_5:
        return rlp.encode([req.lower, req.upper, bloom, req.limit, req.cursor])
    return _encode_binary(req)


def _encode_binary(req: HistoryRequest) -> bytes:
    """geth / early status-go binary form: the shortest length that carries every set field and is not
    also one canonical RLP list.

    A decoder reads an RLP list first (module docstring), so a binary form that happens to be one — possible
    only with ``Lower >= 0xc0000000`` — would come back as another dialect; the next longer form (a 0 limit
    is the default) carries the request instead. Found by fuzzing (docs/fuzzing.md).
    """
    if req.bloom is None:
        raise InvalidRequest("GETH_BINARY requests need a bloom (use FULL_BLOOM for every topic)")
    if req.cursor and len(req.cursor) != CURSOR_LENGTH:
        raise InvalidRequest(f"GETH_BINARY cursor must be {CURSOR_LENGTH} bytes, got {len(req.cursor)}")
    head = req.lower.to_bytes(4, "big") + req.upper.to_bytes(4, "big")
    with_limit = head + req.bloom + req.limit.to_bytes(4, "big")
    if req.cursor:
        forms = [with_limit + req.cursor]
    elif req.limit:
        forms = [with_limit]
    elif req.bloom == FULL_BLOOM:
        forms = [head, head + req.bloom, with_limit]  # 8 bytes means "full bloom" to geth and status-go
    else:
        forms = [head + req.bloom, with_limit]
    for form in forms:
        if _fields(form) is None:
            return form
    raise InvalidRequest("GETH_BINARY: this request's binary form is also an RLP list (Lower >= 0xc0000000)")


def encode_plain(req: HistoryRequest, request_id: bytes) -> bytes:
    """Encode a status-go plain ``MessagesRequest`` — the whole 0x7e payload, no envelope.

    ``request_id`` is sent as-is; status-go clients use the 32 ASCII hex characters of a random UUID.
    """
    return rlp.encode(
        [bytes(request_id), req.lower, req.upper, req.limit, req.cursor, req.bloom or b"", req.topics]
    )


# --------------------------------------------------------------------------------------------- decoding


def _fields(data: bytes) -> list[rlp.Item] | None:
    """The top-level RLP list items, or None when ``data`` is not exactly one canonical RLP list."""
    try:
        item = rlp.decode(data)
    except MalformedRLP:
        return None
    return item if isinstance(item, list) else None


def detect_payload_dialect(data: bytes) -> Dialect:
    """Tell which envelope dialect a decrypted request payload is in (rules in the module docstring)."""
    fields = _fields(data)
    if fields is not None:
        count = len(fields)
        if count == 7:
            if isinstance(fields[3], list):
                return Dialect.STATUS_ENVELOPE
            raise InvalidRequest("7-item request payload without a Topics list as 4th item")
        if count == 6:
            return Dialect.SPEC_6_TOPICS if isinstance(fields[5], list) else Dialect.STATUS_LEGACY_6
        if count == 5:
            return Dialect.SPEC_5
        raise InvalidRequest(f"request payload is an RLP list of {count} items; no dialect has that shape")
    size = len(data)
    if size in GETH_BINARY_LENGTHS:
        return Dialect.GETH_BINARY
    if size < _TIME_RANGE:
        raise InvalidRequest("Undersized p2p request")
    if size < _WITH_BLOOM:
        raise InvalidRequest("Undersized bloom filter in p2p request")
    raise InvalidRequest(f"binary request payload of {size} bytes; expected 8, 72, 76 or 112")


def decode_payload(data: bytes, dialect: Dialect | None = None) -> tuple[HistoryRequest, Dialect]:
    """Decode a decrypted envelope payload; detect the dialect first unless one is given.

    Raises :class:`InvalidRequest` (with the underlying RLP error chained) on any malformed input.
    """
    data = bytes(data)
    if dialect is None:
        dialect = detect_payload_dialect(data)
    if dialect is Dialect.STATUS_PLAIN:
        raise InvalidRequest("STATUS_PLAIN is not an envelope payload; use decode_plain")
    if dialect is Dialect.GETH_BINARY:
        return _decode_binary(data), dialect
    fields = _fields(data)
    expected = _RLP_FIELD_COUNT[dialect]
    if fields is None or len(fields) != expected:
        raise InvalidRequest(f"{dialect.name} payload must be an RLP list of {expected} items")
    try:
        return _decode_rlp_fields(fields, dialect), dialect
    except MalformedRLP as err:
        raise InvalidRequest(f"{dialect.name}: {err.message}") from err


def _decode_rlp_fields(f: list[rlp.Item], dialect: Dialect) -> HistoryRequest:
    lower = rlp.to_uint(f[0], 32, "Lower")
    upper = rlp.to_uint(f[1], 32, "Upper")
    bloom = _string(f[2], "Bloom")
    if dialect is Dialect.STATUS_ENVELOPE:
        return HistoryRequest(
            lower=lower,
            upper=upper,
            bloom=bloom,
            topics=_topics(f[3]),
            limit=rlp.to_uint(f[4], 32, "Limit"),
            cursor=_string(f[5], "Cursor"),
            batch=rlp.to_bool(f[6], "Batch"),
        )
    limit = rlp.to_uint(f[3], 32, "Limit")
    cursor = _string(f[4], "Cursor")
    if dialect is Dialect.STATUS_LEGACY_6:
        batch = rlp.to_bool(f[5], "Batch")
        return HistoryRequest(lower=lower, upper=upper, bloom=bloom, limit=limit, cursor=cursor, batch=batch)
    topics = _topics(f[5]) if dialect is Dialect.SPEC_6_TOPICS else ()
    return HistoryRequest(lower=lower, upper=upper, bloom=bloom, topics=topics, limit=limit, cursor=cursor)


def _decode_binary(data: bytes) -> HistoryRequest:
    size = len(data)
    if size not in GETH_BINARY_LENGTHS:
        raise InvalidRequest(f"binary request payload of {size} bytes; expected 8, 72, 76 or 112")
    return HistoryRequest(
        lower=int.from_bytes(data[0:4], "big"),
        upper=int.from_bytes(data[4:8], "big"),
        bloom=FULL_BLOOM if size == _TIME_RANGE else data[_TIME_RANGE:_WITH_BLOOM],
        limit=int.from_bytes(data[_WITH_BLOOM:_WITH_LIMIT], "big") if size >= _WITH_LIMIT else 0,
        cursor=data[_WITH_LIMIT:] if size == _WITH_CURSOR else b"",
        batch=False,
    )


def decode_plain(data: bytes) -> tuple[HistoryRequest, bytes]:
    """Decode a status-go plain ``MessagesRequest`` (the whole 0x7e payload); return it and its raw ID.

    The ID is returned as sent (any length); :func:`wakucodec.requests.bytes_to_hash` turns it into the
    32-byte request ID status-go answers with.
    """
    fields = _fields(bytes(data))
    if fields is None or len(fields) != 7:
        raise InvalidRequest("a MessagesRequest must be an RLP list of 7 items")
    try:
        request_id = _string(fields[0], "ID")
        req = HistoryRequest(
            lower=rlp.to_uint(fields[1], 32, "From"),
            upper=rlp.to_uint(fields[2], 32, "To"),
            limit=rlp.to_uint(fields[3], 32, "Limit"),
            cursor=_string(fields[4], "Cursor"),
            bloom=_string(fields[5], "Bloom"),
            topics=_topics(fields[6]),
            batch=True,
        )
    except MalformedRLP as err:
        raise InvalidRequest(f"invalid MessagesRequest: {err.message}") from err
    return req, request_id


def _string(item: rlp.Item, what: str) -> bytes:
    if not isinstance(item, bytes):
        raise MalformedRLP(f"{what}: expected an RLP string, found a list")
    return item


def _topics(item: rlp.Item) -> tuple[bytes, ...]:
    if not isinstance(item, list):
        raise MalformedRLP("Topics: expected an RLP list of topics, found a string")
    return tuple(_string(t, "Topics item") for t in item)
