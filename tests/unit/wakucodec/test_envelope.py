"""wakucodec.envelope: vectors (protocol-notes §7.1), strict decoding, raw-byte hashing of 0x01 payloads."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import rlp as pyrlp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wakucodec import rlp
from wakucodec.bloom import topic_to_bloom
from wakucodec.constants import MAX_MESSAGE_SIZE, UINT32_MAX, UINT64_MAX
from wakucodec.envelope import Envelope, decode_envelope, decode_envelopes, encode_envelopes, make_envelope
from wakucodec.errors import CodecError, InvalidEnvelope, MalformedRLP, SizeLimitExceeded
from wakucodec.keccak import keccak256

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VECTOR_RAW = bytes.fromhex("cf8001840000000084deadbeef820114")
VECTOR_HASH = bytes.fromhex("300e63ed3c7a65d646006bd8f92ed35851ac71038f39912186f66bcb8003413f")
TOPIC = bytes.fromhex("f26e7779")

envelope_fields: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "expiry": st.integers(min_value=0, max_value=UINT32_MAX),
        "ttl": st.integers(min_value=0, max_value=UINT32_MAX),
        "topic": st.binary(min_size=4, max_size=4),
        "data": st.one_of(st.binary(max_size=60), st.binary(min_size=200, max_size=2000)),
        "nonce": st.integers(min_value=0, max_value=UINT64_MAX),
    }
)


def lst(*encoded: bytes) -> bytes:
    """An RLP list around already-encoded items (lets tests build non-canonical fields)."""
    body = b"".join(encoded)
    return rlp._header(len(body), 0xC0) + body


def fields(
    expiry: bytes = b"\x80",
    ttl: bytes = b"\x01",
    topic: bytes = b"\x84" + TOPIC,
    data: bytes = b"\x80",
    nonce: bytes = b"\x80",
) -> list[bytes]:
    """Encoded envelope fields, valid by default; override one to make it malformed."""
    return [expiry, ttl, topic, data, nonce]


def reference_decode(raw: bytes) -> tuple[int, int, bytes, bytes, int] | None:
    """Slow, obviously-correct reference: generic RLP decode + Go's struct rules."""
    try:
        item = rlp.decode(raw)
        if not isinstance(item, list) or len(item) != 5:
            return None
        expiry, ttl, topic, data, nonce = item
        if not isinstance(topic, bytes) or len(topic) != 4 or not isinstance(data, bytes):
            return None
        return rlp.to_uint(expiry, 32), rlp.to_uint(ttl, 32), topic, data, rlp.to_uint(nonce, 64)
    except MalformedRLP:
        return None


# --- vectors -----------------------------------------------------------------------------------------


def test_published_vector_nonce_276() -> None:
    env = make_envelope(expiry=0, ttl=1, topic=bytes(4), data=bytes.fromhex("deadbeef"), nonce=276)
    assert env.raw == VECTOR_RAW
    assert env.hash == VECTOR_HASH
    assert decode_envelope(VECTOR_RAW) == env


def test_vector_fields_and_properties() -> None:
    env = decode_envelope(VECTOR_RAW)
    assert (env.expiry, env.ttl, env.topic, env.data, env.nonce) == (0, 1, bytes(4), b"\xde\xad\xbe\xef", 276)
    assert env.size == 24  # 20 + len(Data), not the RLP length
    assert env.sent == UINT32_MAX  # Go: uint32(0 - 1) wraps
    assert env.bloom == topic_to_bloom(bytes(4)) == b"\x01" + bytes(63)
    assert VECTOR_HASH.hex() in repr(env)


def test_nonce_100000_encoding_matches_pyrlp() -> None:
    env = make_envelope(expiry=0, ttl=1, topic=bytes(4), data=bytes.fromhex("deadbeef"), nonce=100000)
    assert env.raw == pyrlp.encode([0, 1, bytes(4), bytes.fromhex("deadbeef"), 100000])
    assert env.raw.hex() == "d08001840000000084deadbeef830186a0"


def test_sent_is_expiry_minus_ttl() -> None:
    assert make_envelope(expiry=1_700_000_120, ttl=120, topic=TOPIC, data=b"").sent == 1_700_000_000


# --- round trips -------------------------------------------------------------------------------------


@FAST
@given(envelope_fields)
def test_round_trip(f: dict[str, Any]) -> None:
    env = make_envelope(**f)
    assert env.raw == pyrlp.encode([f["expiry"], f["ttl"], f["topic"], f["data"], f["nonce"]])
    assert env.hash == keccak256(env.raw)
    decoded = decode_envelope(env.raw)
    assert decoded == env
    assert decoded.raw == env.raw and decoded.hash == env.hash


@FAST
@given(envelope_fields, st.integers(min_value=0, max_value=UINT64_MAX))
def test_with_nonce(f: dict[str, Any], nonce: int) -> None:
    env = make_envelope(**f)
    other = env.with_nonce(nonce)
    changed: dict[str, Any] = {**f, "nonce": nonce}
    assert other == make_envelope(**changed)
    assert (other.expiry, other.ttl, other.topic, other.data) == (env.expiry, env.ttl, env.topic, env.data)


# Header bytes at every boundary of the RLP forms (single byte, short/long string, short/long list).
INTERESTING_BYTES = list(bytes.fromhex("0001373880817f8284858889b7b8b9babbbcc0f7f8f9fafb"))


@st.composite
def mutated_envelopes(draw: st.DrawFn) -> bytes:
    data = bytearray(make_envelope(**draw(envelope_fields)).raw)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        pos = draw(st.integers(min_value=0, max_value=len(data) - 1)) if data else 0
        op = draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        if op == "set" and data:
            data[pos] = draw(st.sampled_from(INTERESTING_BYTES))
        elif op == "insert":
            data.insert(pos, draw(st.sampled_from([0x00, 0x80, 0x81, 0x84, 0xC0])))
        elif op == "delete" and data:
            del data[pos]
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_envelopes())
def test_fast_decoder_agrees_with_reference(raw: bytes) -> None:
    expected = reference_decode(raw)
    try:
        env = decode_envelope(raw)
    except (InvalidEnvelope, MalformedRLP):
        assert expected is None
        return
    assert expected == (env.expiry, env.ttl, env.topic, env.data, env.nonce)
    assert (
        make_envelope(expiry=env.expiry, ttl=env.ttl, topic=env.topic, data=env.data, nonce=env.nonce).raw
        == raw
    )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_random_bytes_never_raise_anything_but_codec_errors(raw: bytes) -> None:
    try:
        env = decode_envelope(raw)
    except CodecError:
        assert reference_decode(raw) is None
        return
    assert env.raw == raw


# --- malformed ---------------------------------------------------------------------------------------

INVALID_SHAPE = {
    "4 items": lst(*fields()[:4]),
    "6 items": lst(*fields(), b"\x80"),
    "empty list": b"\xc0",
    "topic of 3 bytes": lst(*fields(topic=b"\x83\x01\x02\x03")),
    "topic of 5 bytes": lst(*fields(topic=b"\x85\x01\x02\x03\x04\x05")),
    "topic of 1 byte": lst(*fields(topic=b"\x01")),
    "empty topic": lst(*fields(topic=b"\x80")),
    "topic as a list": lst(*fields(topic=b"\xc4\x01\x02\x03\x04")),
    "expiry as a list": lst(*fields(expiry=b"\xc0")),
    "ttl as a list": lst(*fields(ttl=b"\xc1\x01")),
    "data as a list": lst(*fields(data=b"\xc2\x01\x02")),
    "nonce as a list": lst(*fields(nonce=b"\xc0")),
    "a string, not a list": b"\x83abc",
}


@pytest.mark.parametrize("raw", INVALID_SHAPE.values(), ids=INVALID_SHAPE.keys())
def test_wrong_shape_is_invalid_envelope(raw: bytes) -> None:
    with pytest.raises(InvalidEnvelope):
        decode_envelope(raw)


MALFORMED = {
    "expiry single 0x00": lst(*fields(expiry=b"\x00")),
    "expiry 0x81 0x05 (single byte with prefix)": lst(*fields(expiry=b"\x81\x05")),
    "expiry with a leading zero": lst(*fields(expiry=b"\x82\x00\x05")),
    "expiry > uint32": lst(*fields(expiry=b"\x85\x01\x00\x00\x00\x00")),
    "ttl with a leading zero": lst(*fields(ttl=b"\x84\x00\x00\x00\x01")),
    "ttl > uint32": lst(*fields(ttl=b"\x85\xff\xff\xff\xff\xff")),
    "nonce with a leading zero": lst(*fields(nonce=b"\x82\x00\x01")),
    "nonce > uint64": lst(*fields(nonce=b"\x89\x01" + bytes(8))),
    "nonce single 0x00": lst(*fields(nonce=b"\x00")),
    "data 0x81 0x05": lst(*fields(data=b"\x81\x05")),
    "data long form for 3 bytes": lst(*fields(data=b"\xb8\x03abc")),
    "data length with a leading zero": lst(*fields(data=b"\xb9\x00\x40" + bytes(64))),
    "trailing byte": VECTOR_RAW + b"\x00",
    "truncated": VECTOR_RAW[:-1],
    "empty input": b"",
    "item overruns the list": b"\xc5\x80\x01\x84\x00\x00",
    "list long form for a short list": b"\xf8\x0f" + VECTOR_RAW[1:],
    "list header truncated": b"\xf9\x01",
    "list length with a leading zero": b"\xf9\x00\x40" + bytes(64),
    "list length longer than the input": b"\xf9\x01\x00" + bytes(64),
    "data header truncated": lst(*fields()[:3], b"\xb9"),
    "data header truncated inside length": lst(*fields()[:3], b"\xb9\x01"),
    "data long form overruns the list": lst(*fields()[:3], b"\xb8\x40" + bytes(60)),
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_non_canonical_is_malformed_rlp(raw: bytes) -> None:
    with pytest.raises(MalformedRLP):
        decode_envelope(raw)


def test_integer_bounds() -> None:
    top = decode_envelope(lst(*fields(expiry=b"\x84\xff\xff\xff\xff", nonce=b"\x88" + b"\xff" * 8)))
    assert (top.expiry, top.nonce) == (UINT32_MAX, UINT64_MAX)
    assert decode_envelope(lst(*fields(ttl=b"\x80"))).ttl == 0


def test_size_limit_is_checked_before_parsing() -> None:
    assert decode_envelope(VECTOR_RAW, max_size=len(VECTOR_RAW)) is not None
    with pytest.raises(SizeLimitExceeded):
        decode_envelope(VECTOR_RAW, max_size=len(VECTOR_RAW) - 1)
    with pytest.raises(SizeLimitExceeded):
        decode_envelope(b"\xff" * (MAX_MESSAGE_SIZE + 1))  # garbage: the size is reported, not the RLP


def test_accepts_bytes_like_input() -> None:
    assert decode_envelope(bytearray(VECTOR_RAW)).hash == VECTOR_HASH
    assert decode_envelope(memoryview(VECTOR_RAW)).raw == VECTOR_RAW


@pytest.mark.parametrize(
    "changes",
    [
        {"expiry": UINT32_MAX + 1},
        {"ttl": -1},
        {"nonce": UINT64_MAX + 1},
        {"topic": b"abc"},
        {"topic": b"abcde"},
    ],
)
def test_make_envelope_rejects_out_of_range(changes: dict[str, Any]) -> None:
    base: dict[str, Any] = {"expiry": 1, "ttl": 1, "topic": TOPIC, "data": b"x", "nonce": 0}
    with pytest.raises(InvalidEnvelope):
        make_envelope(**{**base, **changes})


def test_envelope_is_frozen() -> None:
    env = decode_envelope(VECTOR_RAW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.nonce = 1  # type: ignore[misc]
    assert not hasattr(env, "__dict__")  # slotted


# --- Messages (0x01) payloads ------------------------------------------------------------------------


def test_decode_envelopes_keeps_raw_bytes_and_hashes_them() -> None:
    envs = [
        make_envelope(expiry=1_700_000_000 + i, ttl=10 * i, topic=TOPIC, data=bytes([i]) * (30 * i), nonce=i)
        for i in range(1, 4)
    ]
    payload = encode_envelopes(envs)
    assert payload == lst(*(env.raw for env in envs))
    decoded = decode_envelopes(payload)
    assert decoded == envs
    for env, raw in zip(decoded, rlp.split_list(payload), strict=True):
        assert env.raw == raw
        assert env.hash == keccak256(raw)


def test_decode_envelopes_edge_cases() -> None:
    assert decode_envelopes(b"\xc0") == []
    payload = encode_envelopes([decode_envelope(VECTOR_RAW)] * 3)
    assert len(decode_envelopes(payload, max_count=3)) == 3
    with pytest.raises(SizeLimitExceeded):
        decode_envelopes(payload, max_count=2)
    with pytest.raises(SizeLimitExceeded):
        decode_envelopes(payload, max_size=len(payload) - 1)
    with pytest.raises(MalformedRLP):
        decode_envelopes(VECTOR_RAW[1:])  # not a list
    with pytest.raises(MalformedRLP):
        decode_envelopes(payload + b"\x00")
    assert decode_envelopes(memoryview(payload)) == decode_envelopes(bytearray(payload))


def test_one_bad_envelope_fails_the_packet() -> None:
    bad = lst(*fields(topic=b"\x83\x01\x02\x03"))
    with pytest.raises(InvalidEnvelope):
        decode_envelopes(lst(VECTOR_RAW, bad, VECTOR_RAW))
    with pytest.raises(MalformedRLP):
        decode_envelopes(lst(VECTOR_RAW, lst(*fields(expiry=b"\x81\x05"))))


def test_envelope_type_is_exported() -> None:
    assert isinstance(decode_envelope(VECTOR_RAW), Envelope)


@pytest.mark.parametrize("data_len", [0, 1, 2, 38, 39, 55, 56, 255, 256, 65535, 65536, 1 << 20])
def test_round_trip_at_header_boundaries(data_len: int) -> None:
    data = b"\x01" if data_len == 1 else bytes([0xAB]) * data_len
    env = make_envelope(expiry=UINT32_MAX, ttl=7, topic=TOPIC, data=data, nonce=2**63)
    assert env.raw == pyrlp.encode([UINT32_MAX, 7, TOPIC, data, 2**63])
    assert decode_envelope(env.raw) == env
    assert decode_envelopes(encode_envelopes([env, env])) == [env, env]
