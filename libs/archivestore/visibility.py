"""Whether a stored row is visible: retention (``expires_at``) and erasures (logical deletes).

Backend-neutral and pure: the Cassandra adapter records erasures where a whole-partition delete cannot
express a cutoff (docs/archive.md "Cassandra adapter"), the SQLite adapter deletes rows and so never has
any, and the Spark job applies the same rule to the rows it scans on either backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FOREVER", "Erasure", "Erasures", "visible"]

#: ``expires_at`` of an envelope kept forever (bigint max): ``expires_at > now`` holds for every ``now``.
FOREVER = 2**63 - 1


@dataclass(frozen=True)
class Erasure:
    """A logical delete: rows it covers whose write time is before ``applied_at`` are gone for readers.

    Covered rows: ``lo <= sent < hi``, topic ``topic`` (None: every topic except ``except_topics``), and
    hash-prefix ``mod modulus == remainder`` (one shard of a partition; modulus 1 = every row). A row
    written after ``applied_at`` (a re-put) is visible again, exactly as after a real delete.
    """

    applied_at: int  # microseconds, the client clock that also stamps writes
    lo: int
    hi: int
    topic: bytes | None = None
    except_topics: frozenset[bytes] = frozenset()
    modulus: int = 1
    remainder: int = 0
    seq: int = field(default=0, compare=False)  # disambiguates erasures recorded in the same microsecond

    def covers_row(self, sent: int, topic: bytes, hash_: bytes) -> bool:
        """Whether the row's key falls inside this erasure (ignoring write times)."""
        if not self.lo <= sent < self.hi:
            return False
        if self.topic is not None:
            if topic != self.topic:
                return False
        elif topic in self.except_topics:
            return False
        return self.modulus == 1 or int.from_bytes(hash_[:2], "big") % self.modulus == self.remainder

    def dominates(self, other: Erasure) -> bool:
        """Whether this erasure hides every row ``other`` hides (so ``other`` can be forgotten)."""
        if self.applied_at < other.applied_at or self.lo > other.lo or self.hi < other.hi:
            return False
        if self.modulus != 1 and (self.modulus, self.remainder) != (other.modulus, other.remainder):
            return False
        if self.topic is not None:
            return other.topic == self.topic
        if other.topic is not None:
            return other.topic not in self.except_topics
        return self.except_topics <= other.except_topics


@dataclass(frozen=True)
class Erasures:
    """The erasures that apply to an operation (newest first)."""

    items: tuple[Erasure, ...] = ()

    def within(self, lo: int, hi: int) -> Erasures:
        """Only the erasures overlapping ``lo <= sent <= hi``."""
        return Erasures(tuple(e for e in self.items if e.lo <= hi and e.hi > lo))

    def hides(self, sent: int, topic: bytes, hash_: bytes, written_at: int | None) -> bool:
        """Whether a row written at ``written_at`` (µs) is erased."""
        if written_at is None:
            return False
        for e in self.items:
            if e.applied_at <= written_at:
                break  # newest first: every later one is older still
            if e.covers_row(sent, topic, hash_):
                return True
        return False

    def __bool__(self) -> bool:
        return bool(self.items)


def visible(
    sent: int,
    topic: bytes,
    hash_: bytes,
    expires_at: int | None,
    written_at: int | None,
    now: int,
    er: Erasures,
) -> bool:
    """A stored row is visible while ``now < expires_at`` and no erasure newer than the row covers it."""
    if expires_at is not None and expires_at != FOREVER and expires_at <= now:
        return False
    return not (er and er.hides(sent, topic, hash_, written_at))
