"""The Whisper v6 / Waku v1 envelope ``[Expiry, TTL, Topic, Data, Nonce]`` (protocol-notes §1.1, §1.2).

Decoding follows go-ethereum v1.9.20 ``whisper/whisperv6/envelope.go`` ``DecodeRLP`` and status-go
``waku/common/envelope.go``: the bytes must decode with Go's strict ``rlp`` package into

    Expiry uint32, TTL uint32, Topic [4]byte, Data []byte, Nonce uint64

and the envelope hash is ``keccak256`` of the **raw received bytes** (which equals the hash of the
re-encoding only because non-canonical input is refused). Error classes:

- :class:`~wakucodec.errors.SizeLimitExceeded` — input longer than ``max_size`` (checked before parsing);
- :class:`~wakucodec.errors.MalformedRLP` — not canonical RLP (headers, truncation, trailing bytes) or an
  integer that is non-canonical / overflows its Go type (rules of :func:`wakucodec.rlp.to_uint`);
- :class:`~wakucodec.errors.InvalidEnvelope` — canonical RLP of the wrong shape: not a list, not exactly five
  items, a list where a string belongs, or a topic that is not exactly 4 bytes.

Decoding is the ingest hot path (every envelope of every 0x01 packet), so :func:`decode_envelope` walks the
input once, field by field, and builds no intermediate item list. The integer and topic fields have a fast
path that accepts only obviously canonical encodings; everything else is handed to
:func:`wakucodec.rlp._read_header` / :func:`wakucodec.rlp.to_uint`, which own the canonical rules (the tests
check the fast path against a plain ``rlp.decode`` + shape-check reference on mutated inputs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from wakucodec import rlp
from wakucodec.bloom import topic_to_bloom
from wakucodec.constants import (
    ENVELOPE_HEADER_LENGTH,
    MAX_MESSAGE_SIZE,
    TOPIC_LENGTH,
    UINT32_MAX,
    UINT64_MAX,
)
from wakucodec.errors import InvalidEnvelope, MalformedRLP, SizeLimitExceeded
from wakucodec.keccak import keccak256
from wakucodec.rlp import _read_header, to_uint

__all__ = ["Envelope", "decode_envelope", "decode_envelopes", "encode_envelopes", "make_envelope"]


@dataclass(frozen=True, slots=True, repr=False)
class Envelope:
    """One decoded or locally built envelope, with its exact RLP bytes and hash.

    Build instances with :func:`make_envelope`, :func:`decode_envelope` or :meth:`with_nonce`: the
    generated constructor does not check that ``raw`` and ``hash`` agree with the fields (it stays cheap
    for the decoder), and :mod:`wakucodec.pow` relies on ``raw`` being the canonical encoding.
    """

    #: UNIX time (s) at which the envelope expires (Go ``uint32``).
    expiry: int
    #: Time to live in seconds (Go ``uint32``); ``expiry - ttl`` is the sent time.
    ttl: int
    #: The 4-byte topic.
    topic: bytes
    #: The (normally encrypted) Whisper message payload.
    data: bytes
    #: Proof-of-work nonce (Go ``uint64``).
    nonce: int
    #: The canonical RLP encoding: the bytes as received when decoded, the encoding when built.
    raw: bytes
    #: ``keccak256(raw)`` — the envelope hash geth/status-go key everything by (§1.2).
    hash: bytes

    @property
    def sent(self) -> int:
        """Sent time ``Expiry - TTL`` as Go computes it: in ``uint32`` arithmetic (wraps if TTL > Expiry)."""
        return (self.expiry - self.ttl) & UINT32_MAX

    @property
    def size(self) -> int:
        """Go ``size()``: ``20 + len(Data)``, used for size limits and the seal target, not the RLP length."""
        return ENVELOPE_HEADER_LENGTH + len(self.data)

    @property
    def bloom(self) -> bytes:
        """The 64-byte bloom of :attr:`topic` (Go assignment rule, :func:`wakucodec.bloom.topic_to_bloom`)."""
        return topic_to_bloom(self.topic)

    def with_nonce(self, nonce: int) -> Envelope:
        """Return a copy with another nonce (and therefore new ``raw`` and ``hash``)."""
        return make_envelope(expiry=self.expiry, ttl=self.ttl, topic=self.topic, data=self.data, nonce=nonce)

    def __repr__(self) -> str:
        return (
            f"Envelope(hash={self.hash.hex()}, expiry={self.expiry}, ttl={self.ttl}, "
            f"topic={self.topic.hex()}, data=<{len(self.data)} bytes>, nonce={self.nonce})"
        )


def make_envelope(
    *,
    expiry: int,
    ttl: int,
    topic: bytes | bytearray | memoryview,
    data: bytes | bytearray | memoryview,
    nonce: int = 0,
) -> Envelope:
    """Build an envelope from its fields, computing its canonical RLP and hash.

    Raises :class:`~wakucodec.errors.InvalidEnvelope` when a field does not fit its Go type (expiry/ttl
    ``uint32``, nonce ``uint64``, topic exactly 4 bytes).
    """
    if not 0 <= expiry <= UINT32_MAX:
        raise InvalidEnvelope(f"Expiry {expiry} does not fit uint32")
    if not 0 <= ttl <= UINT32_MAX:
        raise InvalidEnvelope(f"TTL {ttl} does not fit uint32")
    if not 0 <= nonce <= UINT64_MAX:
        raise InvalidEnvelope(f"Nonce {nonce} does not fit uint64")
    topic_bytes, data_bytes = bytes(topic), bytes(data)
    if len(topic_bytes) != TOPIC_LENGTH:
        raise InvalidEnvelope(f"Topic must be {TOPIC_LENGTH} bytes, got {len(topic_bytes)}")
    raw = rlp.encode([expiry, ttl, topic_bytes, data_bytes, nonce])
    return Envelope(expiry, ttl, topic_bytes, data_bytes, nonce, raw, keccak256(raw))


def _uint_at(raw: bytes, pos: int, stop: int, max_len: int, what: str) -> tuple[int, int]:
    """Read the unsigned integer field at ``pos``; return ``(value, next_pos)``.

    The fast path accepts only encodings that are canonical at a glance (a single byte 0x01..0x7f, ``0x80``
    for zero, or ``0x81``..``0x80+max_len`` followed by a non-zero first byte, with the 0x81 rule); anything
    else — lists, long forms, leading zeros, overflow, truncation — is re-read by :mod:`wakucodec.rlp`, which
    owns the canonical rules and raises the precise error.
    """
    if pos == stop:
        raise InvalidEnvelope(f"too few elements: {what} missing", offset=pos)
    b = raw[pos]
    if b < 0x80:
        if b:
            return b, pos + 1
    elif b == 0x80:
        return 0, pos + 1
    elif b <= 0x80 + max_len:
        start = pos + 1
        end = start + b - 0x80
        first = raw[start] if start < stop else 0
        if end <= stop and first and (b != 0x81 or first >= 0x80):
            return int.from_bytes(raw[start:end], "big"), end
    is_list, start, end = _read_header(raw, pos, stop)
    if is_list:
        raise InvalidEnvelope(f"{what}: expected a string, found a list", offset=pos)
    return to_uint(raw[start:end], 8 * max_len, what), end


def _string_at(raw: bytes, pos: int, stop: int, what: str) -> tuple[int, int]:
    """Return ``(start, end)`` of the string item at ``pos`` (fast path as in :func:`_uint_at`)."""
    if pos == stop:
        raise InvalidEnvelope(f"too few elements: {what} missing", offset=pos)
    b = raw[pos]
    if b < 0x80:  # a single byte is its own encoding
        return pos, pos + 1
    if b == 0x80:
        return pos + 1, pos + 1
    if 0x81 < b <= 0xB7:  # 2..55 bytes: always canonical (0x81 has the single-byte rule: slow path)
        end = pos + b - 0x7F
        if end <= stop:
            return pos + 1, end
    elif 0xB7 < b <= 0xBB:  # 56 bytes .. 4 GiB: canonical if no leading zero and the length is > 55
        start = pos + b - 0xB6
        if start <= stop and raw[pos + 1]:
            length = int.from_bytes(raw[pos + 1 : start], "big")
            if length > 55 and start + length <= stop:
                return start, start + length
    is_list, start, end = _read_header(raw, pos, stop)
    if is_list:
        raise InvalidEnvelope(f"{what}: expected a string, found a list", offset=pos)
    return start, end


def _list_payload_start(raw: bytes, end: int) -> int:
    """Return where the payload of the list spanning all of ``raw`` starts (fast path for 56 B .. 16 MiB)."""
    b = raw[0] if end else 0
    if 0xF7 < b <= 0xFA:  # long list form whose length must be exactly the rest of the input
        start = b - 0xF6
        if end - start > 55 and raw[1] and int.from_bytes(raw[1:start], "big") == end - start:
            return start
    elif 0xC0 <= b <= 0xF7 and b - 0xBF == end:
        return 1
    is_list, start, stop = _read_header(raw, 0, end)
    if not is_list:
        raise InvalidEnvelope("envelope must be an RLP list, found a string")
    if stop != end:
        raise MalformedRLP(f"{end - stop} trailing bytes after the envelope", offset=stop)
    return start


def _decode(raw: bytes) -> Envelope:
    """Decode one envelope from exactly ``raw`` (no size check: callers bound ``raw`` first)."""
    stop = len(raw)
    pos = _list_payload_start(raw, stop)
    # Fields in Go struct order; every header is bounded by the list end, so a missing field shows up as
    # pos == stop and an item overrunning the list as MalformedRLP.
    expiry, pos = _uint_at(raw, pos, stop, 4, "Expiry")
    ttl, pos = _uint_at(raw, pos, stop, 4, "TTL")
    # Topic: 0x84 followed by 4 bytes is the only valid form; anything else goes through rlp for the error.
    if pos + 1 + TOPIC_LENGTH <= stop and raw[pos] == 0x80 + TOPIC_LENGTH:
        start = pos + 1
        pos = start + TOPIC_LENGTH
    else:
        start, pos = _string_at(raw, pos, stop, "Topic")
        if pos - start != TOPIC_LENGTH:
            raise InvalidEnvelope(f"Topic must be a {TOPIC_LENGTH}-byte string", offset=start)
    topic = raw[start:pos]
    start, pos = _string_at(raw, pos, stop, "Data")
    data = raw[start:pos]
    nonce, pos = _uint_at(raw, pos, stop, 8, "Nonce")
    if pos != stop:
        # Go: "rlp: input list has too many elements" — the extra items are not parsed.
        raise InvalidEnvelope("too many elements: envelope lists have exactly 5 items", offset=pos)
    return Envelope(expiry, ttl, topic, data, nonce, raw, keccak256(raw))


def decode_envelope(raw: bytes | bytearray | memoryview, *, max_size: int = MAX_MESSAGE_SIZE) -> Envelope:
    """Strictly decode one RLP envelope; its ``hash`` is ``keccak256(raw)`` (§1.2).

    ``max_size`` bounds ``len(raw)`` and is checked before any parsing. Raises
    :class:`~wakucodec.errors.SizeLimitExceeded`, :class:`~wakucodec.errors.MalformedRLP` or
    :class:`~wakucodec.errors.InvalidEnvelope` (see the module docstring for which is which).
    """
    if len(raw) > max_size:
        raise SizeLimitExceeded("envelope", len(raw), max_size)
    return _decode(raw if type(raw) is bytes else bytes(raw))


def decode_envelopes(
    payload: bytes | bytearray | memoryview, *, max_size: int = MAX_MESSAGE_SIZE, max_count: int | None = None
) -> list[Envelope]:
    """Decode the payload of a Messages (0x01) packet: an RLP list of envelopes.

    Uses :func:`wakucodec.rlp.split_list`, so each envelope keeps the exact bytes it was received as and its
    hash is ``keccak256`` of those (as Go's ``DecodeRLP`` does with ``s.Raw()``). ``max_size`` bounds the
    whole payload, ``max_count`` the number of envelopes (both checked before the envelopes are decoded).
    One bad envelope fails the whole packet, as ``rlp.DecodeBytes(data, &envelopes)`` does in status-go.
    """
    if len(payload) > max_size:
        raise SizeLimitExceeded("Messages payload", len(payload), max_size)
    parts = rlp.split_list(payload if type(payload) is bytes else bytes(payload), max_items=max_count)
    return [_decode(part) for part in parts]


def encode_envelopes(envelopes: Iterable[Envelope]) -> bytes:
    """Encode envelopes as one RLP list of their ``raw`` bytes (a Messages / 0x7f packet payload)."""
    body = b"".join(env.raw for env in envelopes)
    return rlp._header(len(body), 0xC0) + body
