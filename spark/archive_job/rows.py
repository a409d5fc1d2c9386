"""What a stored row is to the job: visible or not, expired by the run's cutoffs, and worth rewriting for.

Visibility is the adapter's own :func:`archivestore.visibility.visible` (retention ``expires_at`` and
recorded erasures against the row's write time), so the job keeps exactly the rows readers return. The
functions here run inside Spark's Python workers: they import only the layout module and plain Python.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import Column

from archivestore.retention import RetentionPolicy
from archivestore.visibility import Erasures, visible

__all__ = [
    "DOOMED",
    "LONG_TTL",
    "VISIBLE",
    "Cutoffs",
    "RowFlags",
    "doomed_column",
    "is_live",
    "is_stranded",
    "live_column",
    "row_flags",
    "stranded_column",
]

#: The row is returned by reads now (retention and erasures).
VISIBLE = 1
#: The row is below this run's retention cutoff for its topic (only set on visible rows).
DOOMED = 2
#: The row's physical TTL has more than ``rewrite_min_ttl_s`` left (or none: kept forever).
LONG_TTL = 4


@dataclass(frozen=True)
class Cutoffs:
    """``sent`` cutoffs of an expiry: a topic's own cutoff replaces the global one (``ExpireRequest``)."""

    cutoff: int | None
    per_topic: Mapping[bytes, int] = field(default_factory=dict)

    @classmethod
    def of(cls, retention: RetentionPolicy, now: int) -> Cutoffs:
        """The cutoffs of ``retention`` at ``now`` (envelopes sent before a cutoff go)."""
        cutoff, per_topic = retention.cutoffs(now)
        return cls(cutoff, per_topic)

    def dooms(self, sent: int, topic: bytes) -> bool:
        """Whether an envelope sent at ``sent`` on ``topic`` is past retention."""
        cut = self.per_topic.get(topic, self.cutoff)
        return cut is not None and sent < cut


#: ``flags(sent, topic, hash, expires_at, written_at_us, ttl_s) -> VISIBLE | DOOMED | LONG_TTL bits``.
RowFlags = Callable[
    [int, "bytes | bytearray", "bytes | bytearray", "int | None", "int | None", "int | None"], int
]


def row_flags(now: int, erasures: Erasures, cutoffs: Cutoffs | None, min_ttl_s: int) -> RowFlags:
    """A picklable function classifying one row (Spark ships it to the executors with its arguments)."""

    def flags(
        sent: int,
        topic: bytes | bytearray,
        hash_: bytes | bytearray,
        expires_at: int | None,
        written: int | None,
        ttl: int | None,
    ) -> int:
        # Spark hands binary columns over as bytearray: unhashable, so never a set or dict key as such.
        t, h = bytes(topic), bytes(hash_)
        out = 0
        if visible(sent, t, h, expires_at, written, now, erasures):
            out |= VISIBLE
            if cutoffs is not None and cutoffs.dooms(sent, t):
                out |= DOOMED
        if ttl is None or ttl > min_ttl_s:
            out |= LONG_TTL
        return out

    return flags


def is_live(flags: int) -> bool:
    """Visible and not being expired: a row the job must keep (and copy when its bucket moves)."""
    return flags & (VISIBLE | DOOMED) == VISIBLE


def is_stranded(flags: int) -> bool:
    """Gone for readers but physically there for longer than the job tolerates: its bucket is rewritten."""
    return not is_live(flags) and bool(flags & LONG_TTL)


# ---------------------------------------------------------------- the same predicates as Spark columns
def live_column(flags: Column) -> Column:
    """:func:`is_live` as a column expression over a ``flags`` column."""
    return flags.bitwiseAND(VISIBLE | DOOMED) == VISIBLE


def doomed_column(flags: Column) -> Column:
    """Visible and past this run's cutoff (what an expiry removes)."""
    return flags.bitwiseAND(VISIBLE | DOOMED) == VISIBLE | DOOMED


def stranded_column(flags: Column) -> Column:
    """:func:`is_stranded` as a column expression over a ``flags`` column."""
    return ~live_column(flags) & (flags.bitwiseAND(LONG_TTL) != 0)
