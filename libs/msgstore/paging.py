"""Skip/take over bucketed listings, as MESSAGING-API "Message Storage" defines them.

``getByContentTopic`` / ``getBySubscriptionId``: ``skip`` passes that many matching records (past the end →
an empty array), ``take`` caps the answer (0 → empty), both omitted → every record. The backends keep a
row count per bucket (written by the single records writer), so a deep ``skip`` passes whole buckets from
their counts and reads only the buckets that hold the page: :func:`plan_reads` turns (counts, skip, take)
into the reads to make. Pure, so it is property-tested against a plain list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BucketRead", "plan_reads", "window"]


@dataclass(frozen=True, slots=True)
class BucketRead:
    """Read bucket ``bucket`` in listing order, drop its first ``offset`` rows, keep at most ``limit`` (None =
    all the rest)."""

    bucket: int
    offset: int
    limit: int | None


def window(skip: int | None, take: int | None) -> tuple[int, int | None]:
    """The spec's optional ``skip``/``take`` as (rows to pass, rows to keep or None for all)."""
    if (skip is not None and skip < 0) or (take is not None and take < 0):
        raise ValueError("skip and take are non-negative")
    return skip or 0, take


def plan_reads(counts: Sequence[tuple[int, int]], skip: int | None, take: int | None) -> list[BucketRead]:
    """The bucket reads that return rows ``[skip, skip + take)`` of a listing.

    ``counts`` are (bucket, rows) in listing order; empty buckets may be listed. Counts are what the writer
    recorded; a backend reading a bucket that holds fewer rows (expired since) just returns fewer.
    """
    rows_to_pass, wanted = window(skip, take)
    if wanted == 0:
        return []
    plan: list[BucketRead] = []
    for bucket, rows in counts:
        if rows <= 0:
            continue
        if rows_to_pass >= rows:
            rows_to_pass -= rows
            continue
        available = rows - rows_to_pass
        if wanted is None:
            plan.append(BucketRead(bucket, rows_to_pass, None))
        else:
            plan.append(BucketRead(bucket, rows_to_pass, min(wanted, available)))
            wanted -= min(wanted, available)
        rows_to_pass = 0
        if wanted == 0:
            break
    return plan
