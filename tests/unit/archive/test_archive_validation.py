"""Field checks and the PutEnvelopes integrity gate (pure functions)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from services.archive.errors import InvalidField, InvalidRange, LimitExceeded
from services.archive.validation import (
    MAX_DETAIL_BYTES,
    CheckedEnvelope,
    check_bloom,
    check_count,
    check_envelope,
    check_hash,
    check_position_hash,
    check_range,
    check_topic,
    clip_detail,
)
from wakucodec import rlp
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.keccak import keccak256

TOPIC = bytes.fromhex("aabbccdd")
MAX = 1024 * 1024


@dataclass(frozen=True)
class Item:
    """What a PutItem carries (archive.proto): the envelope's RLP, its hash, the message hash."""

    rlp: bytes
    hash: bytes
    message_hash: bytes = b""


def honest(e: Envelope, message_hash: bytes = b"") -> Item:
    return Item(e.raw, e.hash, message_hash)


def check(item: Item, max_size: int = MAX) -> CheckedEnvelope | str:
    return check_envelope(item.rlp, item.hash, item.message_hash, max_size=max_size)


def sample(data: bytes = b"hello", **kw: int) -> Envelope:
    fields = {"expiry": 1_700_000_050, "ttl": 50, "nonce": 9, **kw}
    return make_envelope(topic=TOPIC, data=data, **fields)


def test_field_checks_name_the_field() -> None:
    assert check_hash("h", b"\x00" * 32) == b"\x00" * 32
    with pytest.raises(InvalidField, match=r"^h: must be 32 bytes, got 31$") as info:
        check_hash("h", b"\x00" * 31)
    assert info.value.details == {"reason": "INVALID_FIELD", "field": "h"}
    assert check_position_hash("after.hash", b"\x01" * 16) == b"\x01" * 16
    with pytest.raises(InvalidField, match="1 to 32 bytes"):
        check_position_hash("after.hash", b"")
    with pytest.raises(InvalidField, match=r"^topics\[2\]: must be 4 bytes, got 5$"):
        check_topic("topics[2]", b"12345")
    assert check_bloom("bloom", b"") == b""
    assert check_bloom("bloom", b"\xff" * 64) == b"\xff" * 64
    with pytest.raises(InvalidField, match="empty or 64 bytes, got 1"):
        check_bloom("bloom", b"\x01")
    with pytest.raises(LimitExceeded, match=r"^items: must hold 1 to 3 items, got 4$") as limit:
        check_count("items", 4, 1, 3)
    assert limit.value.details["reason"] == "LIMIT_EXCEEDED"
    assert check_range("range", 5, 5) == (5, 5)
    with pytest.raises(InvalidRange, match=r"^query range is invalid: lower > upper \(range: 6 > 5\)$"):
        check_range("range", 6, 5)


def test_an_honest_envelope_passes_with_its_go_size() -> None:
    e = sample(data=b"x" * 300)
    checked = check(honest(e, b"\x07" * 32))
    assert isinstance(checked, CheckedEnvelope)
    assert checked.size == 20 + 300
    stored = checked.envelope
    assert (stored.sent, stored.hash, stored.topic, stored.expiry, stored.raw) == (
        e.sent,
        e.hash,
        e.topic,
        e.expiry,
        e.raw,
    )
    assert stored.message_hash == b"\x07" * 32
    plain = check(honest(e))
    assert isinstance(plain, CheckedEnvelope) and plain.envelope.message_hash is None


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"rlp": b""}, "rlp: required"),
        ({"hash": b"\x00" * 20}, "hash: must be 32 bytes, got 20"),
        ({"hash": b"\x00" * 32}, "hash: is not keccak256(rlp)"),
        ({"hash": sample(nonce=10).hash}, "hash: is not keccak256(rlp)"),  # another envelope's hash
        ({"rlp": sample(nonce=10).raw}, "hash: is not keccak256(rlp)"),  # another envelope's rlp
        ({"rlp": b"\xc3\x01\x02\x03"}, "rlp: not a canonical Waku envelope"),
        ({"rlp": b"\x83abc"}, "rlp: not a canonical Waku envelope"),
        ({"rlp": sample().raw + b"\x00"}, "rlp: not a canonical Waku envelope"),  # trailing bytes
        ({"message_hash": b"\x01" * 33}, "message_hash: must be empty or 32 bytes, got 33"),
    ],
)
def test_a_lying_item_is_refused_with_the_reason(change: dict[str, object], detail: str) -> None:
    e = sample()
    got = check(dataclasses.replace(honest(e), **change))  # type: ignore[arg-type]
    assert isinstance(got, str) and got.startswith(detail), got


def test_a_non_canonical_encoding_of_the_same_fields_is_refused() -> None:
    e = sample()
    # Same five items, but the expiry with a leading zero byte: a different hash for the "same" envelope.
    padded = rlp.encode([b"\x00" + e.expiry.to_bytes(4, "big"), e.ttl, e.topic, e.data, e.nonce])
    got = check(Item(padded, keccak256(padded)))  # the hash is right: canonical form is checked on its own
    assert isinstance(got, str) and got.startswith("rlp: not a canonical Waku envelope")


def test_a_six_item_list_with_its_own_hash_is_refused() -> None:
    e = sample()
    six = rlp.encode([e.expiry, e.ttl, e.topic, e.data, e.nonce, b"extra"])
    got = check(Item(six, keccak256(six)))
    assert isinstance(got, str) and got.startswith("rlp: not a canonical Waku envelope"), got


def test_the_key_columns_come_from_the_rlp() -> None:
    e = sample(expiry=1_700_000_123, ttl=23)
    checked = check(honest(e))
    assert isinstance(checked, CheckedEnvelope)
    assert (checked.envelope.sent, checked.envelope.expiry, checked.envelope.topic) == (
        1_700_000_100,
        1_700_000_123,
        TOPIC,
    )


def test_ttl_beyond_expiry_and_oversized_envelopes_are_refused() -> None:
    wraps = make_envelope(expiry=10, ttl=20, topic=TOPIC, data=b"")
    got = check(honest(wraps))
    assert got == "rlp: ttl 20 exceeds expiry 10, so sent would be negative"
    near = sample(data=b"x" * 1010)
    got = check(honest(near), max_size=1024)
    assert got == "rlp: envelope size 1030 (20 + len(Data)) exceeds 1024"
    big = sample(data=b"x" * 2000)
    got = check(honest(big), max_size=1024)
    assert got == f"rlp: {len(big.raw)} bytes is more than an envelope of size 1024 takes"


def test_details_stay_within_256_bytes() -> None:
    assert clip_detail("short") == "short"
    long = clip_detail("é" * 200)  # 400 bytes of UTF-8
    assert len(long.encode()) <= MAX_DETAIL_BYTES and long.endswith("...") and long.startswith("éé")
