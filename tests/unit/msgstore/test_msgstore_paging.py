"""skip/take over bucket counts (msgstore.paging) against a plain list: MESSAGING-API "Message Storage"."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from msgstore.paging import BucketRead, plan_reads, window

counts_st = st.lists(st.integers(0, 6), max_size=12).map(lambda ns: [(b * 3, n) for b, n in enumerate(ns)])
opt = st.none() | st.integers(0, 80)


def run(counts: list[tuple[int, int]], plan: list[BucketRead]) -> list[tuple[int, int]]:
    """Execute a plan over buckets whose rows are (bucket, index)."""
    out: list[tuple[int, int]] = []
    rows = {b: [(b, i) for i in range(n)] for b, n in counts}
    for read in plan:
        bucket = rows[read.bucket][read.offset :]
        out += bucket if read.limit is None else bucket[: read.limit]
    return out


@given(counts_st, opt, opt)
def test_plan_matches_slicing_the_whole_listing(
    counts: list[tuple[int, int]], skip: int | None, take: int | None
) -> None:
    listing = [(b, i) for b, n in counts for i in range(n)]
    start = skip or 0
    expected = listing[start:] if take is None else listing[start : start + take]
    plan = plan_reads(counts, skip, take)
    assert run(counts, plan) == expected
    # only buckets holding part of the answer are read, each once, in order
    assert [r.bucket for r in plan] == sorted({b for b, _ in expected})
    assert all(r.offset == 0 for r in plan[1:])


def test_the_spec_edge_cases() -> None:
    counts = [(0, 3), (1, 0), (2, 4)]
    assert plan_reads(counts, None, None) == [BucketRead(0, 0, None), BucketRead(2, 0, None)]
    assert plan_reads(counts, None, 0) == []  # take 0 → empty
    assert plan_reads(counts, 7, None) == []  # skip past the end → empty
    assert plan_reads(counts, 100, 5) == []
    assert plan_reads(counts, 3, 2) == [BucketRead(2, 0, 2)]  # whole bucket passed from its count
    assert plan_reads(counts, 2, 100) == [BucketRead(0, 2, 1), BucketRead(2, 0, 4)]
    assert plan_reads([], None, None) == []


def test_negative_skip_or_take_is_a_caller_error() -> None:
    with pytest.raises(ValueError):
        window(-1, None)
    with pytest.raises(ValueError):
        window(None, -1)
    assert window(None, None) == (0, None)
