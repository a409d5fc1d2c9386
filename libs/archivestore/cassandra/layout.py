"""Where a row lives in the Cassandra tables: buckets, days and shards (the shard plan).

Pure functions and small value types, no I/O: the store loads plan rows and hands them here. Whether a row
is visible (retention and erasures) is backend-neutral and lives in :mod:`archivestore.visibility`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from archivestore.cassandra.schema import SHARDED_TABLES, TIME_TABLE
from archivestore.types import ShardPlanEntry

DAY_S = 86_400
#: ``shard = generation * GENERATION_STRIDE + (first 2 bytes of hash) mod shards`` (docs/archive.md).
GENERATION_STRIDE = 65_536
#: The shard column is a CQL int: generation * 65536 + 65535 must stay below 2**31.
MAX_GENERATION = (2**31 - 1) // GENERATION_STRIDE - 1


def day_of(sent: int) -> int:
    """The day partition of ``sent``."""
    return sent // DAY_S


def shard_of(generation: int, shards: int, hash_: bytes) -> int:
    """The shard column for an envelope hash under ``(generation, shards)``."""
    return generation * GENERATION_STRIDE + int.from_bytes(hash_[:2], "big") % shards


def check_table(table: str) -> str:
    """``table`` if it is one of the sharded envelope tables."""
    if table not in SHARDED_TABLES:
        raise ValueError(f"unknown archive table {table!r} (expected one of {', '.join(SHARDED_TABLES)})")
    return table


@dataclass(frozen=True)
class Generation:
    """One generation of a bucket's sharding."""

    generation: int
    shards: int

    def shard_ids(self) -> list[int]:
        """Every shard column value of this generation."""
        return [self.generation * GENERATION_STRIDE + i for i in range(self.shards)]


@dataclass
class ShardPlan:
    """The plan for one table over a bucket range: current and historic generations per bucket.

    Buckets without an entry use generation 0 with the table's default shard count.
    """

    table: str
    default_shards: int
    entries: dict[int, list[Generation]] = field(default_factory=dict)  # bucket -> generations, newest first

    @classmethod
    def from_rows(cls, table: str, default_shards: int, rows: Iterable[ShardPlanEntry]) -> ShardPlan:
        """Build from plan rows (any order)."""
        plan = cls(table, default_shards)
        for row in rows:
            plan.entries.setdefault(row.bucket, []).append(Generation(row.generation, row.shards))
        for gens in plan.entries.values():
            gens.sort(key=lambda g: g.generation, reverse=True)
        return plan

    def current(self, bucket: int) -> Generation:
        """The generation writers and readers use for ``bucket``."""
        gens = self.entries.get(bucket)
        return gens[0] if gens else Generation(0, self.default_shards)

    def shard_for(self, bucket: int, hash_: bytes) -> int:
        """Where a row of ``bucket`` with this hash is written."""
        gen = self.current(bucket)
        return shard_of(gen.generation, gen.shards, hash_)

    def shards_for(self, bucket: int, hash_: bytes) -> list[int]:
        """Every partition a row of ``bucket`` with this hash may be in (one per generation)."""
        gens = list(self.entries.get(bucket, []))
        if all(g.generation != 0 for g in gens):
            gens.append(Generation(0, self.default_shards))
        return [shard_of(g.generation, g.shards, hash_) for g in gens]

    def current_shards(self, bucket: int) -> list[int]:
        """The partitions of the current generation (where ``bucket``'s rows are written now)."""
        return self.current(bucket).shard_ids()

    def all_shards(self, bucket: int) -> list[int]:
        """Every partition that may hold rows of ``bucket``: all recorded generations plus generation 0.

        Readers merge them all (a row copied into a new generation appears twice and is deduplicated by
        hash), so a query returns the same rows before, during and after a Spark repartition, and even if a
        plan was flipped without copying. Old generations emptied by the Spark job cost one partition probe.
        """
        gens = list(self.entries.get(bucket, []))
        if all(g.generation != 0 for g in gens):
            gens.append(Generation(0, self.default_shards))
        return sorted({s for g in gens for s in g.shard_ids()})


def validate_plan_entry(entry: ShardPlanEntry) -> None:
    """Reject entries the shard column cannot represent."""
    check_table(entry.table)
    if not 0 <= entry.generation <= MAX_GENERATION:
        raise ValueError(f"shard plan generation {entry.generation} outside 0..{MAX_GENERATION}")
    if not 1 <= entry.shards <= GENERATION_STRIDE:
        raise ValueError(f"shard count {entry.shards} outside 1..{GENERATION_STRIDE}")


def buckets_of_days(days: Iterable[int], bucket_seconds: int, lo: int, hi: int) -> list[int]:
    """The time buckets in ``[lo, hi]`` that overlap any of ``days`` (sorted)."""
    out: set[int] = set()
    for day in days:
        first = day * DAY_S // bucket_seconds
        last = ((day + 1) * DAY_S - 1) // bucket_seconds
        out.update(range(max(first, lo), min(last, hi) + 1))
    return sorted(out)


def bucket_of(table: str, sent: int, bucket_seconds: int) -> int:
    """The bucket of ``sent`` in ``table``: time bucket for the time table, day for the topic table."""
    return sent // bucket_seconds if table == TIME_TABLE else day_of(sent)


def bucket_span(table: str, bucket: int, bucket_seconds: int) -> tuple[int, int]:
    """``[first, last]`` sent seconds covered by a bucket of ``table``."""
    width = bucket_seconds if table == TIME_TABLE else DAY_S
    return bucket * width, (bucket + 1) * width - 1
