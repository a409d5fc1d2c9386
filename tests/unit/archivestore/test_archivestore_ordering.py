"""The (sent, hash) order and resuming from a position whose hash may be a 16-byte prefix."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archivestore.ordering import HASH_LEN, is_after, position_of, resume_key, sort_key
from archivestore.types import Direction, Position, PutOutcome, PutResult, StoredEnvelope

FWD, BWD = Direction.FORWARD, Direction.BACKWARD


def stored(sent: int, hash_: bytes) -> StoredEnvelope:
    return StoredEnvelope(sent=sent, hash=hash_, topic=b"\x00" * 4, expiry=sent + 10, raw=b"")


def test_resume_key_pads_a_prefix_by_direction() -> None:
    prefix = bytes(range(16))
    assert resume_key(Position(7, prefix), FWD) == (7, prefix + b"\xff" * 16)
    assert resume_key(Position(7, prefix), BWD) == (7, prefix + b"\x00" * 16)


def test_resume_key_keeps_a_full_hash() -> None:
    full = bytes(range(32))
    assert resume_key(Position(7, full), FWD) == (7, full)
    assert resume_key(Position(7, full), BWD) == (7, full)


def test_an_empty_hash_resumes_past_the_whole_second() -> None:
    assert resume_key(Position(7, b""), FWD) == (7, b"\xff" * HASH_LEN)
    assert resume_key(Position(7, b""), BWD) == (7, b"\x00" * HASH_LEN)
    assert not is_after(stored(7, b"\xff" * 32), Position(7, b""), FWD)
    assert is_after(stored(8, b"\x00" * 32), Position(7, b""), FWD)


def test_a_hash_longer_than_32_bytes_is_refused() -> None:
    with pytest.raises(ValueError):
        resume_key(Position(1, b"\x00" * 33), FWD)


def test_is_after_is_strict_in_both_directions() -> None:
    env = stored(10, b"\x55" * 32)
    assert is_after(env, None, FWD) and is_after(env, None, BWD)
    assert not is_after(env, position_of(env), FWD)
    assert not is_after(env, position_of(env), BWD)
    assert is_after(env, Position(9, b"\xff" * 32), FWD)
    assert is_after(env, Position(11, b"\x00" * 32), BWD)
    assert not is_after(env, Position(11, b"\x00" * 32), FWD)


def test_two_envelopes_sharing_second_and_prefix_is_the_documented_loss() -> None:
    # docs/archive.md "Cursor format": resuming from 128 bits continues exactly after the last delivered
    # envelope *unless* two envelopes of the same second share those 128 bits — then the second is skipped.
    first, second = stored(5, b"\x01" * 16 + b"\x00" * 16), stored(5, b"\x01" * 16 + b"\x01" * 16)
    cursor = Position(5, first.hash[:16])
    assert not is_after(second, cursor, FWD)
    assert is_after(second, position_of(first), FWD)  # the full hash would have kept it


def test_sort_key_and_position_of() -> None:
    env = stored(3, b"\x09" * 32)
    assert sort_key(env) == (3, b"\x09" * 32)
    assert position_of(env) == Position(3, b"\x09" * 32)


def test_put_result_counts() -> None:
    result = PutResult((PutOutcome.INSERTED, PutOutcome.DUPLICATE, PutOutcome.EXPIRED, PutOutcome.INSERTED))
    assert (result.inserted, result.duplicates) == (2, 1)


def _archive(keys: list[tuple[int, int]]) -> list[StoredEnvelope]:
    envs = {hashlib.sha256(f"{s}/{n}".encode()).digest(): s for s, n in keys}
    return sorted((stored(s, h) for h, s in envs.items()), key=sort_key)


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50)), min_size=1, max_size=60), st.data())
def test_resuming_from_any_delivered_envelope_yields_exactly_the_rest(
    keys: list[tuple[int, int]], data: st.DataObject
) -> None:
    archive = _archive(keys)
    k = data.draw(st.integers(0, len(archive) - 1))
    at = archive[k]
    for position in (position_of(at), Position(at.sent, at.hash[:16])):
        assert [e for e in archive if is_after(e, position, FWD)] == archive[k + 1 :]
        assert [e for e in archive if is_after(e, position, BWD)] == archive[:k]
