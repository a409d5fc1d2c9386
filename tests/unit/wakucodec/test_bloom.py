"""wakucodec.bloom: Go's TopicToBloom (assignment quirk, protocol-notes §1.4), matching, topic helpers
(§7.2)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wakucodec.bloom import (
    EMPTY_BLOOM,
    FULL_BLOOM,
    bloom_match,
    bytes_to_topic,
    is_full_bloom,
    topic_from_hex,
    topic_to_bloom,
    topic_to_hex,
    topics_to_bloom,
)
from wakucodec.errors import InvalidTopic

FAST = settings(max_examples=200, deadline=None)
topics = st.binary(min_size=4, max_size=4)
blooms = st.binary(min_size=64, max_size=64)


def indices(topic: bytes) -> list[int]:
    return [topic[j] + (256 if topic[3] & (1 << j) else 0) for j in range(3)]


def go_bloom(topic: bytes) -> bytes:
    """Literal transcription of G920 ``TopicToBloom``: ``b[byteIndex] = 1 << bitIndex``."""
    b = bytearray(64)
    for index in indices(topic):
        b[index // 8] = 1 << (index % 8)
    return bytes(b)


def or_bloom(topic: bytes) -> bytes:
    """The spec / Nim form (sets bits): NOT what status-go computes."""
    b = bytearray(64)
    for index in indices(topic):
        b[index // 8] |= 1 << (index % 8)
    return bytes(b)


def loop_match(filter: bytes, sample: bytes) -> bool:
    """Literal transcription of ``BloomFilterMatch``."""
    return all((f | s) == f for f, s in zip(filter, sample, strict=True))


def with_bytes(**set_bytes: int) -> bytes:
    b = bytearray(64)
    for key, value in set_bytes.items():
        b[int(key.removeprefix("b"))] = value
    return bytes(b)


# --- topic → bloom vectors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic_hex", "expected"),
    [
        ("0000ff06", with_bytes(b0=0x01, b32=0x01, b63=0x80)),  # published (G920 TestBloom, NIMETH)
        ("f26e7779", with_bytes(b13=0x40, b14=0x80, b62=0x04)),  # computed, Go rule
        ("aabbccdd", with_bytes(b23=0x08, b53=0x04, b57=0x10)),  # computed, Go rule
        ("01020300", with_bytes(b0=0x08)),  # indices 1, 2, 3 share byte 0: only the last survives
    ],
)
def test_topic_to_bloom_vectors(topic_hex: str, expected: bytes) -> None:
    assert topic_to_bloom(bytes.fromhex(topic_hex)) == expected


def test_assignment_quirk_differs_from_or() -> None:
    topic = bytes.fromhex("01020300")
    assert topic_to_bloom(topic)[0] == 0x08
    assert or_bloom(topic)[0] == 0x0E
    assert topic_to_bloom(bytes.fromhex("f26e7779")) == or_bloom(bytes.fromhex("f26e7779"))  # distinct bytes


@FAST
@given(topics)
def test_topic_to_bloom_is_gos_rule(topic: bytes) -> None:
    bloom = topic_to_bloom(topic)
    assert bloom == go_bloom(topic)
    assert len(bloom) == 64
    assert 1 <= bin(int.from_bytes(bloom, "big")).count("1") <= 3
    assert topic_to_bloom(bytearray(topic)) == bloom


@pytest.mark.parametrize("bad", [b"", b"abc", b"abcde"])
def test_topic_to_bloom_rejects_wrong_length(bad: bytes) -> None:
    with pytest.raises(InvalidTopic):
        topic_to_bloom(bad)


# --- multi-topic blooms ------------------------------------------------------------------------------


def test_topics_to_bloom_is_bytewise_or() -> None:
    a, b = bytes.fromhex("f26e7779"), bytes.fromhex("aabbccdd")
    assert topics_to_bloom([a, b]) == with_bytes(b13=0x40, b14=0x80, b62=0x04, b23=0x08, b53=0x04, b57=0x10)
    assert topics_to_bloom([]) == EMPTY_BLOOM
    assert topics_to_bloom(iter([a])) == topic_to_bloom(a)


def test_topics_to_bloom_ors_go_blooms_not_bits() -> None:
    # Two topics whose Go blooms land in byte 0: OR of the per-topic results, each already "last wins".
    assert topics_to_bloom([bytes.fromhex("01020300"), bytes.fromhex("00000000")]) == with_bytes(b0=0x09)


@FAST
@given(st.lists(topics, max_size=20))
def test_topics_to_bloom_properties(ts: list[bytes]) -> None:
    combined = topics_to_bloom(ts)
    expected = bytearray(64)
    for t in ts:
        expected = bytearray(x | y for x, y in zip(expected, go_bloom(t), strict=True))
    assert combined == bytes(expected)
    assert topics_to_bloom(reversed(ts)) == combined
    assert all(bloom_match(combined, topic_to_bloom(t)) for t in ts)


# --- matching ----------------------------------------------------------------------------------------


@FAST
@given(blooms, blooms)
def test_bloom_match_equals_gos_loop(filter: bytes, sample: bytes) -> None:
    assert bloom_match(filter, sample) == loop_match(filter, sample)


@FAST
@given(topics, blooms)
def test_match_properties(topic: bytes, sample: bytes) -> None:
    own = topic_to_bloom(topic)
    assert bloom_match(own, own)  # a bloom matches its own topic
    assert bloom_match(FULL_BLOOM, sample)  # a full node matches everything
    assert bloom_match(None, sample) and bloom_match(b"", sample)  # no filter matches everything
    assert bloom_match(sample, EMPTY_BLOOM)  # an empty sample matches anything
    assert bloom_match(EMPTY_BLOOM, own) is False  # interested in nothing


def test_match_is_subset_not_intersection() -> None:
    a, b = topic_to_bloom(bytes.fromhex("f26e7779")), topic_to_bloom(bytes.fromhex("aabbccdd"))
    assert not bloom_match(a, b)
    assert not bloom_match(a, topics_to_bloom([bytes.fromhex("f26e7779"), bytes.fromhex("aabbccdd")]))
    assert bloom_match(topics_to_bloom([bytes.fromhex("f26e7779"), bytes.fromhex("aabbccdd")]), a)


@pytest.mark.parametrize(
    ("filter", "sample"), [(bytes(63), bytes(64)), (bytes(64), bytes(65)), (FULL_BLOOM, b"")]
)
def test_bloom_match_rejects_wrong_lengths(filter: bytes, sample: bytes) -> None:
    with pytest.raises(ValueError):
        bloom_match(filter, sample)


def test_is_full_bloom() -> None:
    assert is_full_bloom(None) and is_full_bloom(b"") and is_full_bloom(FULL_BLOOM)
    assert not is_full_bloom(EMPTY_BLOOM)
    assert not is_full_bloom(b"\xff" * 63 + b"\xfe")
    assert not is_full_bloom(b"\xff" * 63)
    assert FULL_BLOOM == b"\xff" * 64
    assert len(EMPTY_BLOOM) == 64
    assert not any(EMPTY_BLOOM)


# --- topic conversions (SG waku/common/topic_test.go) -------------------------------------------------

TOPIC_STRINGS = [
    (bytes([0x00, 0x00, 0x00, 0x00]), "0x00000000"),
    (bytes([0x00, 0x7F, 0x80, 0xFF]), "0x007f80ff"),
    (bytes([0xFF, 0x80, 0x7F, 0x00]), "0xff807f00"),
    (bytes([0xF2, 0x6E, 0x77, 0x79]), "0xf26e7779"),
]


@pytest.mark.parametrize(("topic", "text"), TOPIC_STRINGS)
def test_topic_hex_round_trip(topic: bytes, text: str) -> None:
    assert topic_to_hex(topic) == text
    assert topic_from_hex(text) == topic


def test_topic_from_hex_accepts_either_case() -> None:
    assert topic_from_hex("0XF26E7779") == bytes.fromhex("f26e7779")


def test_topic_from_hex_byte_order() -> None:  # unmarshalTestsUgly: parses, but is not {0x01, 0, 0, 0}
    assert topic_from_hex("0x00000001") == b"\x00\x00\x00\x01"


@pytest.mark.parametrize(
    "text",
    [
        "0x000000", "0x0000000", "0x000000000", "0x0000000000",  # wrong length
        "000000", "0000000", "000000000", "0000000000", "00000000",  # no 0x prefix
        "abcdefg0", "0xabcdefg0", "0x 0000000", "0x0000 000", "0x" + "\uff11" * 8, "", "0x",
    ],
)  # fmt: skip
def test_topic_from_hex_rejects(text: str) -> None:
    with pytest.raises(InvalidTopic):
        topic_from_hex(text)


def test_topic_to_hex_rejects_wrong_length() -> None:
    with pytest.raises(InvalidTopic):
        topic_to_hex(b"abc")


@pytest.mark.parametrize(
    ("data", "topic"),
    [
        (bytes([0x8F, 0x9A, 0x2B, 0x7D]), bytes([0x8F, 0x9A, 0x2B, 0x7D])),
        (bytes([0x00, 0x7F, 0x80, 0xFF]), bytes([0x00, 0x7F, 0x80, 0xFF])),
        (bytes([0x00, 0x00, 0x00, 0x00]), bytes(4)),
        (bytes([0x00, 0x00, 0x00]), bytes(4)),
        (bytes([0x01]), bytes([0x01, 0x00, 0x00, 0x00])),
        (bytes([0x00, 0xFE]), bytes([0x00, 0xFE, 0x00, 0x00])),
        (bytes([0xEA, 0x1D, 0x43]), bytes([0xEA, 0x1D, 0x43, 0x00])),
        (bytes([0x6F, 0x3C, 0xB0, 0xDD, 0x0F, 0x00, 0x90]), bytes([0x6F, 0x3C, 0xB0, 0xDD])),
        (b"", bytes(4)),
    ],
)
def test_bytes_to_topic(data: bytes, topic: bytes) -> None:
    assert bytes_to_topic(data) == topic
    assert bytes_to_topic(bytearray(data)) == topic
