"""wakucodec.rlp: pyrlp as the encoding oracle, and the strict canonical decoding rules of geth's rlp."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest
import rlp as pyrlp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wakucodec import rlp
from wakucodec.errors import CodecError, MalformedRLP, SizeLimitExceeded

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Nested items with strings of every header form: single byte, short (<= 55) and long (> 55) strings/lists.
strings = st.one_of(
    st.binary(max_size=3),
    st.binary(min_size=50, max_size=60),
    st.binary(max_size=300),
)
items: st.SearchStrategy[Any] = st.recursive(
    strings, lambda child: st.lists(child, max_size=8), max_leaves=25
)


def pyrlp_decode(data: bytes) -> Any:
    """pyrlp's strict decode, or None when pyrlp rejects the input."""
    try:
        return pyrlp.decode(data, strict=True)
    except Exception:
        return None


def ours_decode(data: bytes) -> Any:
    try:
        return rlp.decode(data)
    except MalformedRLP:
        return None


# --- encoding against the oracle ---------------------------------------------------------------------


@FAST
@given(items)
def test_encode_matches_pyrlp(item: Any) -> None:
    assert rlp.encode(item) == pyrlp.encode(item)


@FAST
@given(items)
def test_decode_inverts_encode(item: Any) -> None:
    assert rlp.decode(rlp.encode(item)) == item


@FAST
@given(st.integers(min_value=0, max_value=2**256))
def test_uint_matches_pyrlp_and_round_trips(value: int) -> None:
    encoded = rlp.encode_uint(value)
    assert encoded == pyrlp.encode(value) == rlp.encode(value)
    assert rlp.to_uint(rlp.decode(encoded), 264) == value


@pytest.mark.parametrize("length", [0, 1, 2, 55, 56, 255, 256, 65535, 65536])
def test_length_boundaries_match_pyrlp(length: int) -> None:
    blob = b"\x80" * length
    assert rlp.encode(blob) == pyrlp.encode(blob)
    assert rlp.decode(rlp.encode(blob)) == blob
    as_list: list[rlp.Encodable] = [b"\x01"] * length  # payload of `length` bytes
    assert rlp.encode(as_list) == pyrlp.encode(as_list)
    assert rlp.decode(rlp.encode(as_list)) == as_list


def test_encode_known_values() -> None:
    assert rlp.encode(b"") == b"\x80"
    assert rlp.encode(b"\x00") == b"\x00"
    assert rlp.encode(b"\x7f") == b"\x7f"
    assert rlp.encode(b"\x80") == b"\x81\x80"
    assert rlp.encode([]) == b"\xc0"
    assert rlp.encode(0) == b"\x80"
    assert rlp.encode(1024) == b"\x82\x04\x00"
    assert rlp.encode(b"dog") == b"\x83dog"
    assert rlp.encode([[], [[]], [[], [[]]]]) == bytes.fromhex("c7c0c1c0c3c0c1c0")
    assert rlp.encode((b"cat", bytearray(b"dog"))) == b"\xc8\x83cat\x83dog"


@pytest.mark.parametrize("bad", [-1, True, False, "text", 1.5, None, {b"a": b"b"}])
def test_encode_rejects_unencodable(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        rlp.encode(bad)


# --- canonical decoding: fuzz ------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_decode_only_if_canonical(data: bytes) -> None:
    decoded = ours_decode(data)
    if decoded is not None:
        assert rlp.encode(decoded) == data  # anything we accept re-encodes to exactly the same bytes
    assert decoded == pyrlp_decode(data)  # and we accept exactly what strict pyrlp accepts


@st.composite
def mutated_encodings(draw: st.DrawFn) -> bytes:
    data = bytearray(rlp.encode(draw(items)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "append"]))
        pos = draw(st.integers(min_value=0, max_value=max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif op == "set" and data:
            data[pos] = draw(
                st.sampled_from([0x00, 0x7F, 0x80, 0x81, 0xB7, 0xB8, 0xBF, 0xC0, 0xF7, 0xF8, 0xFF])
            )
        elif op == "insert":
            data.insert(pos, draw(st.integers(min_value=0, max_value=255)))
        elif op == "delete" and data:
            del data[pos]
        elif op == "truncate":
            del data[pos:]
        elif op == "append":
            data.append(draw(st.integers(min_value=0, max_value=255)))
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_encodings())
def test_mutated_encodings_decode_only_if_canonical(data: bytes) -> None:
    decoded = ours_decode(data)
    if decoded is not None:
        assert rlp.encode(decoded) == data
    assert decoded == pyrlp_decode(data)


# --- malformed input table ---------------------------------------------------------------------------

MALFORMED = {
    "empty input": b"",
    "single byte 0x00 with a string prefix": b"\x81\x00",
    "single byte 0x7f with a string prefix": b"\x81\x7f",
    "long string form for length 5": b"\xb8\x05hello",
    "long string form for length 55": b"\xb8\x37" + b"a" * 55,
    "long list form for length 3": b"\xf8\x03\x01\x02\x03",
    "string length with a leading zero": b"\xb9\x00\x40" + b"a" * 64,
    "list length with a leading zero": b"\xf9\x00\x40" + b"\x01" * 64,
    "truncated short string": b"\x83ab",
    "truncated long string": b"\xb8\x40" + b"a" * 10,
    "truncated length prefix": b"\xb9\x01",
    "length prefix with no length bytes": b"\xbf",
    "truncated list": b"\xc3\x01\x02",
    "child overruns its list": b"\xc2\x83abc",
    "trailing byte after a string": b"\x01\x02",
    "trailing byte after a list": b"\xc0\x00",
    "non-canonical child inside a list": b"\xc2\x81\x05",
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_input_is_rejected(data: bytes) -> None:
    with pytest.raises(MalformedRLP):
        rlp.decode(data)
    assert pyrlp_decode(data) is None  # the oracle agrees these are invalid


def test_errors_are_codec_errors_with_offsets() -> None:
    with pytest.raises(CodecError) as info:
        rlp.decode(b"\xc2\x83abc")
    assert isinstance(info.value, MalformedRLP)
    assert info.value.offset == 1


def nested(depth: int) -> bytes:
    """``depth`` lists, each the only element of the next (built iteratively: no recursion)."""
    data = b"\xc0"
    for _ in range(depth - 1):
        data = rlp._header(len(data), 0xC0) + data
    return data


def test_nesting_up_to_the_limit_decodes() -> None:
    assert rlp.decode(nested(rlp._MAX_DEPTH)) is not None


def test_over_deep_nesting_is_rejected() -> None:
    with pytest.raises(MalformedRLP, match="nesting"):
        rlp.decode(nested(rlp._MAX_DEPTH + 1))
    with pytest.raises(MalformedRLP):
        rlp.decode(nested(5000))  # no RecursionError on hostile depth


@pytest.mark.parametrize(
    "data",
    [
        b"\xbf" + b"\xff" * 8 + b"x",  # string declaring 2**64 - 1 bytes
        b"\xff" + b"\xff" * 8 + b"\xc0",  # list declaring 2**64 - 1 bytes
        b"\xbb\x7f\xff\xff\xff" + b"x",  # string declaring ~2 GiB
    ],
)
def test_huge_declared_length_fails_fast_without_allocating(data: bytes) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        for decoder in (rlp.decode, rlp.split_list):
            with pytest.raises(MalformedRLP):
                decoder(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 0.5
    assert peak < 64 * 1024


def test_max_size_is_checked_before_parsing() -> None:
    assert rlp.decode(b"\x83abc", max_size=4) == b"abc"
    with pytest.raises(SizeLimitExceeded) as info:
        rlp.decode(b"\x83abc", max_size=3)
    assert (info.value.size, info.value.limit) == (4, 3)
    with pytest.raises(SizeLimitExceeded):
        rlp.decode(b"\xff" * 100, max_size=10)  # garbage, but too big is reported first


# --- to_uint / to_bool -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "bits", "value"),
    [
        (b"", 32, 0),
        (b"\x01", 32, 1),
        (b"\x7f", 8, 127),
        (b"\xff" * 4, 32, 2**32 - 1),
        (b"\xff" * 8, 64, 2**64 - 1),
    ],
)
def test_to_uint_accepts_canonical(item: bytes, bits: int, value: int) -> None:
    assert rlp.to_uint(item, bits) == value


@pytest.mark.parametrize(
    ("item", "bits"),
    [
        (b"\x00", 32),  # zero must be the empty string
        (b"\x00\x01", 32),  # leading zero byte
        (b"\x01\x00\x00\x00\x00", 32),  # overflows uint32
        (b"\x01" + b"\x00" * 8, 64),  # overflows uint64
        (b"\x01\x00", 8),
        ([], 32),  # a list is not an integer
    ],
)
def test_to_uint_rejects_non_canonical_and_overflow(item: rlp.Item, bits: int) -> None:
    with pytest.raises(MalformedRLP):
        rlp.to_uint(item, bits)


def test_to_bool() -> None:
    assert rlp.to_bool(b"") is False
    assert rlp.to_bool(b"\x01") is True
    bad_items: list[rlp.Item] = [b"\x00", b"\x02", b"\x01\x00", [], [b"\x01"]]
    for bad in bad_items:
        with pytest.raises(MalformedRLP):
            rlp.to_bool(bad)


# --- split_list --------------------------------------------------------------------------------------


@FAST
@given(st.lists(items, max_size=6))
def test_split_list_returns_exact_raw_spans(elements: list[Any]) -> None:
    payload = rlp.encode(elements)
    parts = rlp.split_list(payload)
    assert parts == [rlp.encode(e) for e in elements]
    assert payload.endswith(b"".join(parts))
    assert [rlp.decode(p) for p in parts] == elements


def test_split_list_spans_of_non_canonical_children_are_the_raw_bytes() -> None:
    # Only headers are checked; a child's body is the caller's to decode (and reject).
    payload = rlp.encode([b"abc", [b"\x01", b"\x02"]])
    assert rlp.split_list(payload) == [b"\x83abc", b"\xc2\x01\x02"]


@pytest.mark.parametrize(
    "data",
    [b"\x83abc", b"\xc2\x01\x02\x03", b"\xc3\x01\x02", b"\xc2\x81\x05", b"", b"\xf8\x02\x01\x02"],
    ids=["string", "trailing", "truncated", "non-canonical child", "empty", "long form short list"],
)
def test_split_list_rejects(data: bytes) -> None:
    with pytest.raises(MalformedRLP):
        rlp.split_list(data)


def test_split_list_limits() -> None:
    payload = rlp.encode([b"a", b"b", b"c"])
    assert len(rlp.split_list(payload, max_items=3)) == 3
    with pytest.raises(SizeLimitExceeded):
        rlp.split_list(payload, max_items=2)
    with pytest.raises(SizeLimitExceeded):
        rlp.split_list(payload, max_size=len(payload) - 1)
