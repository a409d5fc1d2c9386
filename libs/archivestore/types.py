"""Value types shared by the storage protocol and its adapters (plain data, no I/O)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

#: The two bucketed envelope tables, named alike by both adapters, the archive service and the Spark job:
#: by sent time (``sent // bucket_seconds``) and by topic and day (docs/design.md "Archive data model").
TIME_TABLE = "envelopes_by_time"
TOPIC_TABLE = "envelopes_by_topic"
BUCKETED_TABLES = (TIME_TABLE, TOPIC_TABLE)


class Direction(enum.Enum):
    """Iteration order over ``(sent, hash)``."""

    FORWARD = "forward"  # oldest first — status-go LevelDB behaviour (docs/protocol-notes.md §4.4)
    BACKWARD = "backward"  # newest first — status-go Postgres behaviour (§4.5)


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """A point in the archive's total order; iteration resumes strictly past it (after or before).

    ``hash`` may be a prefix of the envelope hash (the 36-byte cursor carries 16 bytes); see
    :func:`archivestore.ordering.resume_key` for how a prefix resumes without skipping or repeating.
    """

    sent: int
    hash: bytes


@dataclass(frozen=True, slots=True)
class StoredEnvelope:
    """One envelope as stored: its ordering key, topic, expiry, optional 14/WAKU2 message hash, raw RLP."""

    sent: int
    hash: bytes
    topic: bytes
    expiry: int
    raw: bytes
    message_hash: bytes | None = None


@dataclass(frozen=True, slots=True)
class PutItem:
    """An envelope to store, with an optional per-item retention override in seconds."""

    envelope: StoredEnvelope
    retention_s: int | None = None


class PutOutcome(enum.Enum):
    """What ``put`` did with one item."""

    INSERTED = "inserted"
    DUPLICATE = "duplicate"  # already stored (same hash): idempotent re-ingest
    EXPIRED = "expired"  # already past its retention: not written


@dataclass(frozen=True, slots=True)
class PutResult:
    """Per-item outcomes of a ``put`` batch, in input order."""

    outcomes: tuple[PutOutcome, ...]

    @property
    def inserted(self) -> int:
        """How many items were newly stored."""
        return sum(1 for o in self.outcomes if o is PutOutcome.INSERTED)

    @property
    def duplicates(self) -> int:
        """How many items were already stored."""
        return sum(1 for o in self.outcomes if o is PutOutcome.DUPLICATE)


@dataclass(frozen=True, slots=True)
class Query:
    """A range query. ``topics`` (non-empty) overrides ``bloom``; one of them must be given.

    Bounds are inclusive; ``after`` resumes strictly after (forward) or before (backward) a position.
    """

    lower: int
    upper: int
    limit: int
    topics: frozenset[bytes] = frozenset()
    bloom: bytes | None = None
    after: Position | None = None
    direction: Direction = Direction.FORWARD


@dataclass(frozen=True, slots=True)
class QueryPage:
    """Envelopes in query order, and whether more match after the last one."""

    envelopes: list[StoredEnvelope]
    has_more: bool


@dataclass(frozen=True, slots=True)
class PackedPage:
    """A query page as columns: ``raws[i]`` was sent at ``sents[i]`` and hashes to ``hashes[i]``.

    For callers that forward envelopes as they are (the archive's ENVELOPE_VIEW_PACKED): an adapter can build
    the columns straight from its rows, with no object per envelope (docs/benchmarks.md).
    """

    raws: Sequence[bytes]
    sents: Sequence[int]
    hashes: Sequence[bytes]
    has_more: bool

    @classmethod
    def of(cls, page: QueryPage) -> PackedPage:
        """The columns of an envelope page."""
        envelopes = page.envelopes
        raws, sents, hashes = (
            [e.raw for e in envelopes],
            [e.sent for e in envelopes],
            [e.hash for e in envelopes],
        )
        return cls(raws, sents, hashes, page.has_more)


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts for operators and the ``Stats`` RPC."""

    envelopes: int
    topics: int
    oldest_sent: int | None
    newest_sent: int | None
    backend: str
    detail: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BucketInfo:
    """One storage partition: a time bucket (and shard) of a table, with its size."""

    table: str
    bucket: int
    shard: int
    rows: int
    size_bytes: int
    topic: bytes | None = None


@dataclass(frozen=True, slots=True)
class ShardPlanEntry:
    """How many shards a bucket of a table is split into, under which generation."""

    table: str
    bucket: int
    generation: int
    shards: int


@dataclass(frozen=True, slots=True)
class ExpireRequest:
    """Remove what is past retention: a global cutoff (sent < cutoff) and per-topic cutoffs."""

    cutoff: int | None
    topic_cutoffs: dict[bytes, int] = field(default_factory=dict)
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class ExpireResult:
    """What ``expire`` removed (or would remove, when dry-run)."""

    envelopes: int
    partitions: int
    dry_run: bool
