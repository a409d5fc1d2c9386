"""The 36-byte authenticated cursor: format, round trip, tampering, secrets, rotation, query binding."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archivestore.types import Direction
from meshcore.errors import InvalidArgument
from services.history.cursor import (
    CURSOR_LENGTH,
    CursorAuthError,
    CursorCodec,
    CursorDirectionError,
    CursorError,
    CursorLengthError,
    CursorPosition,
    CursorQueryMismatch,
    query_fingerprint,
)

SECRET = bytes(range(32))
OLD_SECRET = bytes.fromhex("aa" * 32)
OTHER_SECRET = bytes.fromhex("bb" * 32)
HASH = bytes.fromhex("00112233445566778899aabbccddeeff" * 2)
TOPICS = (bytes.fromhex("01020304"), bytes.fromhex("0a0b0c0d"))
LOWER, UPPER = 1_000, 2_000
FP = query_fingerprint(LOWER, UPPER, TOPICS, None)

hashes = st.binary(min_size=32, max_size=32)
uint32 = st.integers(0, 2**32 - 1)
directions = st.sampled_from(list(Direction))
topic_sets = st.lists(st.binary(min_size=4, max_size=4), max_size=5).map(tuple)
blooms = st.none() | st.binary(min_size=64, max_size=64)


def mint(codec: CursorCodec | None = None, direction: Direction = Direction.FORWARD) -> bytes:
    codec = codec or CursorCodec([SECRET])
    return codec.encode(1_500, HASH, direction, FP)


def check(cursor: bytes, codec: CursorCodec, direction: Direction = Direction.FORWARD) -> CursorPosition:
    return codec.decode(cursor, direction, FP, lower=LOWER, upper=UPPER)


def test_layout_is_the_documented_one() -> None:
    cursor = mint()
    assert len(cursor) == CURSOR_LENGTH == 36
    assert cursor[:4] == (1_500).to_bytes(4, "big")
    assert cursor[4:20] == HASH[:16]
    topics = b"".join(sorted(TOPICS))
    fingerprint = hashlib.sha256(
        LOWER.to_bytes(4, "big") + UPPER.to_bytes(4, "big") + (2).to_bytes(4, "big") + topics
    ).digest()
    assert fingerprint == FP
    message = b"mailmesh-cursor-v1" + b"\x01" + cursor[:20] + fingerprint
    assert cursor[20:] == hmac.new(SECRET, message, hashlib.sha256).digest()[:16]


@given(
    sent=uint32, envelope_hash=hashes, direction=directions, topics=topic_sets, bloom=blooms, secret=hashes
)
def test_round_trip(
    sent: int,
    envelope_hash: bytes,
    direction: Direction,
    topics: tuple[bytes, ...],
    bloom: bytes | None,
    secret: bytes,
) -> None:
    codec = CursorCodec([secret])
    fp = query_fingerprint(0, 0, topics, bloom)
    cursor = codec.encode(sent, envelope_hash, direction, fp)
    assert len(cursor) == 36
    assert codec.decode(cursor, direction, fp, lower=0, upper=2**32 - 1) == CursorPosition(
        sent, envelope_hash[:16]
    )


@pytest.mark.parametrize("index", range(36))
@pytest.mark.parametrize("flip", [0x01, 0x80, 0xFF])
def test_every_tampered_byte_is_rejected(index: int, flip: int) -> None:
    codec = CursorCodec([SECRET])
    cursor = bytearray(mint(codec))
    cursor[index] ^= flip
    with pytest.raises(CursorError) as err:
        check(bytes(cursor), codec)
    assert isinstance(err.value, InvalidArgument)
    # Altering the sent time may push it out of the range: then the message says so; else the tag fails.
    assert isinstance(err.value, CursorAuthError | CursorQueryMismatch)
    if index >= 4:
        assert isinstance(err.value, CursorAuthError)


@given(cursor=st.binary(min_size=36, max_size=36))
def test_random_cursors_are_rejected(cursor: bytes) -> None:
    with pytest.raises(CursorError):
        check(cursor, CursorCodec([SECRET]))


@pytest.mark.parametrize("length", [1, 20, 35, 37, 64, 100])
def test_wrong_length(length: int) -> None:
    cursor = (mint() * 3)[:length]
    with pytest.raises(CursorLengthError, match=f"must be 36 bytes, got {length}"):
        check(cursor, CursorCodec([SECRET]))


def test_wrong_secret_is_rejected() -> None:
    with pytest.raises(CursorAuthError, match="authentication failed") as err:
        check(mint(CursorCodec([OTHER_SECRET])), CursorCodec([SECRET]))
    assert "another deployment" in err.value.message


def test_rotation_old_secret_second_still_verifies_and_new_one_signs() -> None:
    old_cursor = mint(CursorCodec([OLD_SECRET]))
    rotated = CursorCodec([SECRET, OLD_SECRET])
    assert check(old_cursor, rotated) == CursorPosition(1_500, HASH[:16])
    new_cursor = mint(rotated)
    assert check(new_cursor, CursorCodec([SECRET])) == CursorPosition(1_500, HASH[:16])
    with pytest.raises(CursorAuthError):
        check(new_cursor, CursorCodec([OLD_SECRET]))
    with pytest.raises(CursorAuthError):  # once the old secret is dropped, its cursors die
        check(old_cursor, CursorCodec([SECRET]))


def test_cursor_of_another_query_is_rejected() -> None:
    codec = CursorCodec([SECRET])
    cursor = mint(codec)
    other_queries = [
        query_fingerprint(LOWER + 1, UPPER, TOPICS, None),
        query_fingerprint(LOWER, UPPER + 1, TOPICS, None),
        query_fingerprint(LOWER, 0, TOPICS, None),
        query_fingerprint(LOWER, UPPER, TOPICS[:1], None),
        query_fingerprint(LOWER, UPPER, (), b"\xff" * 64),
    ]
    for fp in other_queries:
        with pytest.raises(CursorAuthError, match="different query"):
            codec.decode(cursor, Direction.FORWARD, fp, lower=LOWER, upper=UPPER)


def test_cursor_outside_the_range_is_reported_as_another_query() -> None:
    codec = CursorCodec([SECRET])
    cursor = mint(codec)  # sent 1500
    fp = query_fingerprint(1_600, 1_700, TOPICS, None)
    with pytest.raises(CursorQueryMismatch, match=r"different query .*sent time 1500.* 1600\.\.1700"):
        codec.decode(cursor, Direction.FORWARD, fp, lower=1_600, upper=1_700)


@pytest.mark.parametrize("issued", list(Direction))
def test_cursor_for_the_other_direction_is_rejected(issued: Direction) -> None:
    codec = CursorCodec([SECRET])
    used = Direction.BACKWARD if issued is Direction.FORWARD else Direction.FORWARD
    with pytest.raises(CursorDirectionError, match=f"issued for a {issued.value} query"):
        check(mint(codec, issued), codec, used)


def test_fingerprint_normalisation() -> None:
    a, b = TOPICS
    assert query_fingerprint(1, 2, (a, b), None) == query_fingerprint(1, 2, (b, a, b), None)
    # Topics override the bloom, so the bloom sent alongside them does not change the query.
    assert query_fingerprint(1, 2, (a,), b"\x01" * 64) == query_fingerprint(1, 2, (a,), None)
    assert query_fingerprint(1, 2, (), b"\x01" * 64) != query_fingerprint(1, 2, (), b"\x02" * 64)
    # upper = 0 ("now + 60") is its own query, distinct from any resolved upper.
    assert query_fingerprint(1, 0, (a,), None) != query_fingerprint(1, 2, (a,), None)


def test_codec_needs_a_secret() -> None:
    with pytest.raises(ValueError):
        CursorCodec([])
    with pytest.raises(ValueError):
        CursorCodec([b""])
    with pytest.raises(ValueError):
        CursorCodec([SECRET]).encode(2**32, HASH, Direction.FORWARD, FP)
