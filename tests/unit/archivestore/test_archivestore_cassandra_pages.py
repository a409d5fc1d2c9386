"""Page sizing of the Cassandra merge (``cassandra.query._Progress``): pure arithmetic, no node needed.

Correctness never depends on it (a short page is followed by another; the contract suite checks answers);
these tests pin the estimate itself so a change to it is deliberate.
"""

from __future__ import annotations

from typing import Any

from archivestore.cassandra.query import Row, _Progress, _Reader


class _FakeReader:
    """Just what ``need`` reads: the rows buffered (sent first) and how many were fetched in all."""

    def __init__(self, sents: list[int], fetched: int) -> None:
        self.rows = [(s, b"h", b"t", 0, b"", None, None, None) for s in sents]
        self.fetched = fetched


def _need(progress: _Progress, reader: _FakeReader) -> int:
    fake: Any = reader
    reader_: _Reader = fake
    return progress.need(reader_)


def _row(sent: int) -> Row:
    return (sent, b"h", b"t", 0, b"", None, None, None)


def test_without_progress_a_reader_may_take_every_row_still_wanted() -> None:
    out: list[Row] = []
    progress = _Progress(1000, True, 1001, out)
    assert _need(progress, _FakeReader([1000, 1010], 2)) == 1001
    out.extend(_row(1000 + i) for i in range(10))
    assert _need(progress, _FakeReader([], 0)) == 991  # nothing fetched yet: no density to judge by


def test_forward_estimate_follows_the_merge_pace_and_the_partition_density() -> None:
    # 100 rows merged over the first 100 s: the merge stops about 900 s further on (at ~1000 s).
    out = [_row(1000 + i) for i in range(100)]
    progress = _Progress(1000, True, 1000, out)
    # This partition fetched 50 rows over its first 200 s: density 0.25/s, ~800 s left to cover -> 200 rows,
    # with the 25 % margin 250.
    assert _need(progress, _FakeReader([1199], 50)) == 250
    # A partition already fetched past the expected stop needs nothing more (the caller still asks MIN_PAGE).
    assert _need(progress, _FakeReader([2500], 10)) == 0


def test_backward_estimate_measures_distance_from_the_upper_bound() -> None:
    out = [_row(5000 - i) for i in range(100)]
    progress = _Progress(5000, False, 1000, out)
    assert _need(progress, _FakeReader([4801], 50)) == 250


def test_estimate_never_exceeds_the_rows_still_wanted() -> None:
    out = [_row(1000 + i) for i in range(100)]
    progress = _Progress(1000, True, 150, out)
    assert _need(progress, _FakeReader([1001], 100)) == 50
