"""Shard hashing stability and the outbox resume position's byte form (msgstore.sharding)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from msgstore.errors import InvalidPosition
from msgstore.sharding import POSITION_VERSION, ResumePosition, day_of, lease_name, shard_of

IDS = ["1692854c-cbde-4afe-901f-1c86ecbd9ea1", "00000000-0000-4000-8000-000000000000", "x"]


def test_shards_are_pinned_values() -> None:
    # Pinned literals: changing the hash would move every stored request to another owner.
    assert [shard_of(i, 16) for i in IDS] == [2, 10, 4]
    assert [shard_of(i, 1024) for i in IDS] == [850, 346, 68]


def test_shards_are_the_same_in_another_interpreter() -> None:
    # Python's hash() is salted per process (PYTHONHASHSEED); shard_of must not be.
    code = (
        "import sys; sys.path[:0] = ['libs']; from msgstore.sharding import shard_of; "
        f"print([shard_of(i, 16) for i in {IDS!r}])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123"},
    )
    assert out.stdout.strip() == str([shard_of(i, 16) for i in IDS])


@given(st.text(max_size=40), st.integers(1, 1024))
def test_shard_is_in_range_and_deterministic(request_id: str, shards: int) -> None:
    assert 0 <= shard_of(request_id, shards) < shards
    assert shard_of(request_id, shards) == shard_of(request_id, shards)


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=64))
def test_position_round_trips(sequences: list[int]) -> None:
    position = ResumePosition(tuple(sequences))
    raw = position.encode()
    assert raw[0] == POSITION_VERSION and len(raw) == 3 + 8 * len(sequences)
    assert ResumePosition.decode(raw, len(sequences)) == position


@given(st.lists(st.integers(0, 2**40), min_size=2, max_size=8), st.data())
def test_advancing_never_moves_back(sequences: list[int], data: st.DataObject) -> None:
    shard = data.draw(st.integers(0, len(sequences) - 1))
    to = data.draw(st.integers(0, 2**41))
    moved = ResumePosition(tuple(sequences)).advanced(shard, to)
    assert moved.sequences[shard] == max(sequences[shard], to)
    assert [s for i, s in enumerate(moved.sequences) if i != shard] == [
        s for i, s in enumerate(sequences) if i != shard
    ]


def test_bad_positions_are_refused() -> None:
    good = ResumePosition((1, 2, 3)).encode()
    assert ResumePosition.decode(b"", 3) == ResumePosition.start(3)
    for raw in (b"\x01", bytes([2]) + good[1:], good[:-1], good + b"\x00"):
        with pytest.raises(InvalidPosition):
            ResumePosition.decode(raw, 3)
    with pytest.raises(InvalidPosition):
        ResumePosition.decode(good, 4)  # another shard count


def test_days_and_lease_names() -> None:
    assert day_of(86_399.9) == 0 and day_of(86_400) == 1
    assert lease_name(7) == "outbox/7"
    with pytest.raises(ValueError):
        shard_of("x", 0)
