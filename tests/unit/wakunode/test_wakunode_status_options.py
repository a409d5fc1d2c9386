"""Status options: round trips per version, the computed protocol-notes §3.4 vector, protocol-notes §7.5
cases, malformed input."""

from __future__ import annotations

import dataclasses
import math

import pytest

from wakucodec import rlp
from wakucodec.bloom import FULL_BLOOM, topic_to_bloom
from wakunode.errors import BadStatus
from wakunode.status_options import (
    RateLimits,
    StatusOptions,
    bits_to_pow,
    decode_options,
    decode_shh_bloom,
    decode_shh_pow,
    decode_shh_status,
    decode_waku0_status,
    encode_options,
    encode_shh_status,
    encode_waku0_status,
    pow_to_bits,
)

#: §3.4 computed example: pow 0, full bloom, light false, confirmations false, zero packet and byte limits.
VECTOR_34 = bytes.fromhex("f85ac28080f84301b840" + "ff" * 64 + "c20280c20380c504c3808080c506c3808080")

#: SG status_options_test.go "all options" values (§7.5).
ALL = StatusOptions(
    pow_requirement=6.02,
    bloom=topic_to_bloom(bytes.fromhex("aabbccdd")),
    light_node=True,
    confirmations=True,
    packet_rate_limits=RateLimits(10, 5, 1),
    topic_interest=(b"\x01\x00\x00\x00", b"\x02\x00\x00\x00", b"\x03\x00\x00\x00", b"\x04\x00\x00\x00"),
    bytes_rate_limits=RateLimits(10, 5, 1),
)


def test_pow_bits_vectors() -> None:
    assert pow_to_bits(0.2) == 0x3FC999999999999A
    assert pow_to_bits(0.001) == 0x3F50624DD2F1A9FC
    assert pow_to_bits(0.000002) == 0x3EC0C6F7A0B5ED8D
    assert pow_to_bits(0.0) == 0 and rlp.encode(pow_to_bits(0.0)) == b"\x80"
    assert bits_to_pow(pow_to_bits(6.02)) == 6.02


def test_computed_waku1_vector() -> None:
    opts = StatusOptions(0.0, FULL_BLOOM, False, False, RateLimits(), None, RateLimits())
    assert encode_options(opts) == VECTOR_34
    assert decode_options(VECTOR_34) == opts


@pytest.mark.parametrize("version", [0, 1])
def test_round_trip_all_options(version: int) -> None:
    decoded = decode_options(encode_options(ALL, version=version), version=version)
    expected = ALL if version == 1 else dataclasses.replace(ALL, bytes_rate_limits=None)  # no key 6 in waku/0
    assert decoded == expected


def test_keys_ascending_and_absent_omitted() -> None:
    item = rlp.decode(encode_options(StatusOptions(pow_requirement=1.0, confirmations=True)))
    assert item == [[b"", rlp.encode_uint(pow_to_bits(1.0))[1:]], [b"\x03", b"\x01"]]
    waku0 = rlp.decode(encode_options(StatusOptions(light_node=False), version=0))
    assert waku0 == [[b"2", b""]]


def test_waku0_status_round_trip_and_keys_are_strings() -> None:
    payload = encode_waku0_status(ALL)
    item = rlp.decode(payload)
    assert isinstance(item, list) and item[0] == b""  # version 0
    keys = [pair[0] for pair in item[1]]  # type: ignore[index]
    assert keys == [b"0", b"1", b"2", b"3", b"4", b"5"]  # no key 6 in waku/0
    assert decode_waku0_status(payload).topic_interest == ALL.topic_interest
    with pytest.raises(BadStatus, match="version mismatch"):
        decode_waku0_status(rlp.encode([1, []]))


def test_backward_compatible_pow_only() -> None:
    payload = rlp.encode([[0, pow_to_bits(2.05)]])
    assert decode_options(payload) == StatusOptions(pow_requirement=2.05)


def test_unknown_keys_ignored() -> None:
    forward = rlp.encode([[0, pow_to_bits(2.05)], [99, b"whatever", b"extra"]])
    assert decode_options(forward) == StatusOptions(pow_requirement=2.05)
    # Unlike status-go (which stops at an unknown key), later keys are still read (RFC6 "SHOULD ignore").
    middle = rlp.encode([[99, [1, 2]], [2, b"\x01"]])
    assert decode_options(middle) == StatusOptions(light_node=True)
    assert decode_options(rlp.encode([[b"9", b"x"]]), version=0) == StatusOptions()


def test_with_defaults_and_merge() -> None:
    defaults = StatusOptions().with_defaults()
    assert defaults.pow_requirement == 0.001 and defaults.bloom == FULL_BLOOM
    assert defaults.light_node is False and defaults.packet_rate_limits == RateLimits()
    merged = defaults.merged(StatusOptions(topic_interest=(b"abcd",)))
    assert merged.topic_interest == (b"abcd",) and merged.bloom is None
    again = merged.merged(StatusOptions(bloom=FULL_BLOOM, pow_requirement=1.5))
    assert again.topic_interest is None and again.bloom == FULL_BLOOM and again.pow_requirement == 1.5


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (rlp.encode([[0, pow_to_bits(math.nan)]]), "invalid pow"),
        (rlp.encode([[0, pow_to_bits(math.inf)]]), "invalid pow"),
        (rlp.encode([[0, pow_to_bits(-1.0)]]), "invalid pow"),
        (rlp.encode([[1, b"\xff" * 10]]), "bloom filter size 10"),
        (rlp.encode([[1, [b"x"]]]), "byte string"),
        (rlp.encode(b"not a list"), "outer list"),
        (rlp.encode([b"not a pair"]), "inner list"),
        (rlp.encode([[2, b"\x02"]]), "boolean"),
        (rlp.encode([[5, [b"abc"]]]), "4-byte"),
        (rlp.encode([[5, [b"abcd"] * 10_001]]), "limited"),
        (rlp.encode([[4, [1, 2]]]), "3 integers"),
        (rlp.encode([[2, b"\x01", b"extra"]]), r"\[key, value\]"),
        (rlp.encode([[[1], b"\x01"]]), "invalid key"),
        (b"\xc5\x84abc", "failed to decode"),
        (rlp.encode([[0, b"\x00\x01"]]), "failed to decode"),
    ],
)
def test_malformed_options(payload: bytes, match: str) -> None:
    with pytest.raises(BadStatus, match=match):
        decode_options(payload)


def test_empty_bloom_and_empty_topic_interest_are_valid() -> None:
    assert decode_options(rlp.encode([[1, b""]])).bloom == b""
    assert decode_options(rlp.encode([[5, []]])).topic_interest == ()


def test_shh_status_round_trip_and_geth_form() -> None:
    opts = StatusOptions(
        pow_requirement=0.2,
        bloom=FULL_BLOOM,
        light_node=True,
        confirmations=True,
        packet_rate_limits=RateLimits(1, 2, 3),
    )
    payload = encode_shh_status(opts)
    assert decode_shh_status(payload) == opts
    geth = rlp.encode([6, pow_to_bits(0.2), topic_to_bloom(b"abcd"), b""])  # what geth sends
    decoded = decode_shh_status(geth)
    assert decoded.pow_requirement == 0.2 and decoded.bloom == topic_to_bloom(b"abcd")
    assert decoded.confirmations is None
    # Only the version is mandatory; geth's peer defaults fill the rest.
    minimal = decode_shh_status(rlp.encode([6]))
    assert (minimal.pow_requirement, minimal.bloom, minimal.light_node) == (0.0, FULL_BLOOM, False)
    # A mistyped optional field ends the optional part (geth's err == nil checks).
    assert decode_shh_status(rlp.encode([6, [1]])).pow_requirement == 0.0


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (rlp.encode([5, 0]), "version mismatch 5 != 6"),
        (rlp.encode([]), "version"),
        (rlp.encode(b"x"), "version"),
        (rlp.encode([6, pow_to_bits(math.nan)]), "invalid pow"),
        (rlp.encode([6, 0, b"\x01" * 63]), "bloom filter size 63"),
    ],
)
def test_malformed_shh_status(payload: bytes, match: str) -> None:
    with pytest.raises(BadStatus, match=match):
        decode_shh_status(payload)


def test_shh_setting_packets() -> None:
    assert decode_shh_pow(rlp.encode(pow_to_bits(0.5))) == 0.5
    assert decode_shh_bloom(rlp.encode(FULL_BLOOM)) == FULL_BLOOM
    for bad in (rlp.encode(pow_to_bits(-0.5)), rlp.encode([1]), b"\xff"):
        with pytest.raises(BadStatus):
            decode_shh_pow(bad)
    for bad in (rlp.encode(b""), rlp.encode(b"\x01" * 65), rlp.encode([FULL_BLOOM])):
        with pytest.raises(BadStatus):
            decode_shh_bloom(bad)
