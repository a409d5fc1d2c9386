"""The plan: what happens to each bucket, decided from per-partition statistics (pure Python, no Spark).

A partition of a bucket is, against the shard plan (:class:`archivestore.cassandra.layout.ShardPlan`):

- ``current``: a shard of the bucket's current generation (where writers write now);
- ``stale``: a shard of an older recorded generation (or of generation 0): readers still merge it, writers
  no longer write it; it holds rows left by a move that did not finish;
- ``orphan``: a shard of a generation newer than any recorded for the bucket: a copy that a killed run
  wrote but never published; nobody reads or writes it, so it is deleted (and its generation never reused);
- ``unreachable``: a shard of a recorded generation outside its shard count (for example after
  ``ARCHIVE_DEFAULT_SHARDS`` was lowered): nobody reads it; reported, never touched.

Per bucket, at most one of: **drop** nothing (its expired partitions are deleted whole), **move** (rewrite
the live rows into a new generation: the bucket is oversized, or holds removed rows that would otherwise
stay on disk for long), **converge** (copy the rows of stale partitions missing from the current ones,
then delete the stale partitions). A move converges too, once its plan is published.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from archivestore.cassandra.layout import MAX_GENERATION, Generation, ShardPlan
from spark.archive_job.tables import generation_of

__all__ = [
    "BucketStats",
    "Move",
    "Plan",
    "Policy",
    "Role",
    "decide",
    "recorded_generation",
    "role_of",
]


class Role:
    """Partition roles (plain strings: they travel through Spark columns)."""

    CURRENT = "current"
    STALE = "stale"
    ORPHAN = "orphan"
    UNREACHABLE = "unreachable"


def recorded_generation(plan: ShardPlan, bucket: int) -> int:
    """The newest generation the plan records for ``bucket`` (0 when it has no entry)."""
    return max((g.generation for g in plan.entries.get(bucket, ())), default=0)


def role_of(plan: ShardPlan, bucket: int, shard: int) -> str:
    """The role of partition ``(bucket, shard)`` under ``plan`` (module docstring)."""
    if shard in plan.current_shards(bucket):
        return Role.CURRENT
    if shard in plan.all_shards(bucket):
        return Role.STALE
    if generation_of(shard) > recorded_generation(plan, bucket):
        return Role.ORPHAN
    return Role.UNREACHABLE


@dataclass(frozen=True)
class Policy:
    """What the run may do and the bounds it keeps."""

    expire: bool
    split: bool
    max_rows: int
    max_bytes: int
    target_fill: float = 0.5
    max_shards: int = 4096


@dataclass(frozen=True)
class BucketStats:
    """One bucket of one table, over its current and stale partitions that are not dropped whole."""

    table: str
    bucket: int
    rows: int  # physical rows in every partition of the bucket, whatever their role
    current_max_rows: int
    current_max_bytes: int
    current_stranded: int
    live_rows: int
    live_bytes: int
    stale_rows: int
    max_generation_seen: int  # over every partition present, orphans and dropped ones included
    current_dropped: int = 0  # current partitions an expiry deletes whole


@dataclass(frozen=True)
class Move:
    """Rewrite a bucket's live rows from every generation into ``target``."""

    table: str
    bucket: int
    source: Generation
    target: Generation
    reasons: tuple[str, ...]
    live_rows: int


@dataclass
class Plan:
    """Every bucket-level decision of a run (partition deletes are collected by the flow)."""

    moves: list[Move] = field(default_factory=list)
    converge: list[tuple[str, int]] = field(default_factory=list)
    unsplittable: list[tuple[str, int]] = field(default_factory=list)  # oversized, already at max shards

    def lines(self, limit: int = 100) -> list[str]:
        """The plan for humans (``--dry-run`` prints it), at most ``limit`` moves and buckets listed."""
        out = [f"move {len(self.moves)} bucket(s), converge {len(self.converge)}"]
        for m in self.moves[:limit]:
            out.append(
                f"  move {m.table} bucket {m.bucket}: generation {m.source.generation} x{m.source.shards} -> "
                f"{m.target.generation} x{m.target.shards} ({', '.join(m.reasons)}; {m.live_rows} live rows)"
            )
        out += [f"  converge {table} bucket {bucket}" for table, bucket in self.converge[:limit]]
        out += [f"  oversized but at the shard limit: {t} bucket {b}" for t, b in self.unsplittable[:limit]]
        hidden = sum(max(0, len(x) - limit) for x in (self.moves, self.converge, self.unsplittable))
        if hidden:
            out.append(f"  … and {hidden} more (plan_entries in the report lists every move once published)")
        return out


def target_shards(current: Generation, stats: BucketStats, policy: Policy, oversized: bool) -> int:
    """Shards for a rewrite: unchanged unless oversized, then enough for ``target_fill`` of the bounds
    (at least double), capped at ``max_shards``."""
    if not oversized:
        return current.shards
    by_rows = math.ceil(stats.live_rows / (policy.max_rows * policy.target_fill))
    by_bytes = math.ceil(stats.live_bytes / (policy.max_bytes * policy.target_fill))
    return min(policy.max_shards, max(current.shards * 2, by_rows, by_bytes))


def decide(stats: Iterable[BucketStats], plans: Mapping[str, ShardPlan], policy: Policy) -> Plan:
    """The plan for every bucket (see the module docstring); deterministic for the same input."""
    plan = Plan()
    for s in sorted(stats, key=lambda s: (s.table, s.bucket)):
        shard_plan = plans[s.table]
        current = shard_plan.current(s.bucket)
        oversized = policy.split and (
            s.current_max_rows > policy.max_rows or s.current_max_bytes > policy.max_bytes
        )
        reasons: list[str] = []
        shards = target_shards(current, s, policy, oversized)
        if oversized:
            if shards > current.shards:
                reasons.append("oversized")
            else:
                plan.unsplittable.append((s.table, s.bucket))
        if policy.expire and s.current_stranded > 0:
            reasons.append("removed rows")
        elif s.stale_rows > 0 and s.current_dropped > 0:
            # Converging would copy stale rows into current partitions that are about to be deleted whole
            # (a tombstone newer than the copies' kept write times): rewrite into a fresh generation instead.
            reasons.append("stale rows beside expired partitions")
        if reasons:
            generation = max(s.max_generation_seen, recorded_generation(shard_plan, s.bucket)) + 1
            if generation > MAX_GENERATION:
                raise ValueError(
                    f"{s.table} bucket {s.bucket}: no shard generation left (max {MAX_GENERATION})"
                )
            target = Generation(generation, shards)
            plan.moves.append(Move(s.table, s.bucket, current, target, tuple(reasons), s.live_rows))
        elif s.stale_rows > 0:
            plan.converge.append((s.table, s.bucket))
    return plan
