"""Message encoding inside a frame: RLP message ids and snappy with the decoded-length check
(protocol-notes §5.5)."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devp2p import constants as c
from devp2p.errors import MalformedMessage, MessageTooLarge
from devp2p.messages import (
    decode_frame_data,
    encode_frame_data,
    snappy_compress,
    snappy_decoded_length,
    snappy_decompress,
    split_msg_id,
)


@pytest.mark.parametrize(
    ("code", "wire"),
    [(0, "80"), (1, "01"), (16, "10"), (127, "7f"), (128, "8180"), (142, "818e"), (271, "82010f")],
)
def test_msg_id_encoding(code: int, wire: str) -> None:
    data = encode_frame_data(code, b"\xc0", snappy=False)
    assert data == bytes.fromhex(wire) + b"\xc0"
    assert split_msg_id(data) == (code, b"\xc0")


@pytest.mark.parametrize(
    "frame",
    [
        b"",  # empty frame
        b"\x81\x05",  # single byte < 0x80 with a string prefix
        b"\x82\x00\x80",  # leading zero
        b"\x89" + bytes(9),  # longer than uint64
        b"\xc0",  # a list
        b"\x83\x01\x02",  # truncated
    ],
)
def test_bad_msg_ids(frame: bytes) -> None:
    with pytest.raises(MalformedMessage):
        split_msg_id(frame)


def test_ping_compressed_matches_reference() -> None:
    # §5.5 [computed]: ping payload c0 compressed = 01 00 c0.
    assert encode_frame_data(2, b"\xc0", snappy=True) == b"\x02\x01\x00\xc0"
    assert decode_frame_data(b"\x02\x01\x00\xc0", snappy=True) == (2, b"\xc0")


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=5000), st.integers(min_value=0, max_value=2**20))
def test_snappy_round_trip(payload: bytes, code: int) -> None:
    data = encode_frame_data(code, payload, snappy=True)
    assert decode_frame_data(data, snappy=True) == (code, payload)
    assert decode_frame_data(encode_frame_data(code, payload, snappy=False), snappy=False) == (code, payload)


def test_snappy_large_and_compressible() -> None:
    payload = b"waku envelope " * 80_000  # ~1.1 MB
    block = snappy_compress(payload)
    assert len(block) < len(payload) // 10
    assert snappy_decoded_length(block) == len(payload)
    assert snappy_decompress(block) == payload


def test_crafted_2gib_length_rejected_without_allocating() -> None:
    block = bytes.fromhex("8080808008") + b"\x00" * 16  # varint 2^31, then garbage
    assert snappy_decoded_length(block) == 2**31
    tracemalloc.start()
    try:
        with pytest.raises(MessageTooLarge) as info:
            snappy_decompress(block)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.size == 2**31 and info.value.limit == c.SNAPPY_MAX_DECODED_SIZE
    assert peak < 64 * 1024


def test_decoded_length_limit_is_configurable() -> None:
    block = snappy_compress(bytes(1000))
    with pytest.raises(MessageTooLarge):
        snappy_decompress(block, max_size=999)
    assert snappy_decompress(block, max_size=1000) == bytes(1000)
    with pytest.raises(MessageTooLarge):
        decode_frame_data(b"\x10" + bytes(1000), snappy=False, max_size=999)


@pytest.mark.parametrize(
    "block",
    [
        b"",  # no header
        b"\x80\x80\x80\x80\x80\x01",  # varint longer than 5 bytes
        b"\xff\xff\xff\xff\x7f",  # > uint32
        b"\x05\x00abc",  # declares 5, corrupt body
        b"\x0a\x08abcd",  # literal shorter than declared
    ],
)
def test_corrupt_snappy(block: bytes) -> None:
    with pytest.raises(MalformedMessage):
        snappy_decompress(block)


def test_plain_message_too_large_for_snappy() -> None:
    with pytest.raises(MessageTooLarge):
        encode_frame_data(0x10, bytes(c.SNAPPY_MAX_DECODED_SIZE + 1), snappy=True)
