"""Event sequence numbers: epoch fencing and partition buckets.

One replica at a time writes records and events: the holder of lease ``records/writer``. Its sequences
must stay strictly increasing across writers even when a deposed writer's write lands late (a GC pause, a
partition): a new writer with lease epoch ``e`` numbers from above both the greatest sequence it can read
and ``e << EPOCH_SHIFT``. A deposed writer (epoch < e) numbers below ``(epoch + 1) << EPOCH_SHIFT <= e <<
EPOCH_SHIFT``, so its late events are always numbered below the new writer's, and a consumer that has
passed the new writer's events can never be handed an older writer's event above its position. 2**40
sequences per epoch is ~35 years at 1,000 events/s.

Events are stored in partitions of ``2**BUCKET_BITS`` consecutive sequences; since sequences jump at each
epoch, the buckets in use are listed in their own small partition (see the backends).
"""

from __future__ import annotations

__all__ = ["BUCKET_BITS", "EPOCH_SHIFT", "bucket_of", "epoch_ceiling", "first_sequence"]

EPOCH_SHIFT = 40
BUCKET_BITS = 12


def first_sequence(epoch: int, greatest_seen: int) -> int:
    """The first sequence a writer holding lease ``epoch`` may use."""
    if epoch < 1:
        raise ValueError("lease epochs start at 1")
    return max(greatest_seen, epoch << EPOCH_SHIFT) + 1


def epoch_ceiling(epoch: int) -> int:
    """The first sequence a writer of ``epoch`` must never reach (the next epoch's floor)."""
    return (epoch + 1) << EPOCH_SHIFT


def bucket_of(sequence: int) -> int:
    """The event partition holding ``sequence``."""
    return sequence >> BUCKET_BITS
