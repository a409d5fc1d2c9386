"""Maintenance logic behind Stats, ListBuckets, DeleteBuckets, the shard plan and Expire (no gRPC, no protos).

The storage protocol is narrower than the gRPC API (see README "Decisions"); this module fills the gap
with what the protocol does offer:

- buckets are addressed by index (``sent // width``); the API by their start in sent time;
- DeleteBuckets and Expire report sizes *before* removal, so the partitions are listed first;
- Expire removes whole buckets only: its cutoffs are rounded down to bucket boundaries before the store's
  row-level ``expire`` runs (the global one to the time-bucket width, per-topic ones to a day);
- the shard plan has no stored version: the version is derived from the entries' generations, which every
  effective change raises (each changed bucket moves to a new generation, as the adapters expect).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

from archivestore.protocol import ArchiveStore
from archivestore.types import (
    BUCKETED_TABLES,
    TIME_TABLE,
    TOPIC_TABLE,
    BucketInfo,
    ExpireRequest,
    ShardPlanEntry,
)
from services.archive.errors import InvalidField, PlanConflict, PlanPrecondition
from wakucodec.constants import UINT32_MAX

__all__ = [
    "DAY_S",
    "TABLES",
    "TIME_TABLE",
    "TOPIC_TABLE",
    "ArchiveStats",
    "DeleteOutcome",
    "ExpireOutcome",
    "Layout",
    "PlanView",
    "WantedEntry",
    "collect_stats",
    "delete_buckets",
    "expire",
    "list_buckets",
    "plan_changes",
    "plan_version",
    "read_plan",
    "write_plan",
]

TABLES = BUCKETED_TABLES
DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class Layout:
    """Bucket widths: the time table's is ``ARCHIVE_BUCKET_SECONDS``, the topic table's one day."""

    bucket_seconds: int

    def width(self, table: str) -> int:
        """Seconds of sent time one bucket of ``table`` covers."""
        return self.bucket_seconds if table == TIME_TABLE else DAY_S

    def bucket_at(self, table: str, start: int, field: str) -> int:
        """The bucket index starting at ``start``; INVALID_ARGUMENT unless ``start`` is aligned."""
        width = self.width(table)
        if start % width:
            raise InvalidField(field, f"{start} is not aligned to the {width}-second buckets of {table}")
        return start // width

    def start_of(self, table: str, bucket: int) -> int:
        """Sent time at which bucket ``bucket`` of ``table`` starts."""
        return bucket * self.width(table)

    def buckets_starting_in(self, table: str, lower: int, upper: int) -> tuple[int, int]:
        """Bucket indices whose start lies in ``[lower, upper]`` (empty when first > last)."""
        width = self.width(table)
        return -(-lower // width), upper // width

    def all_buckets(self, table: str) -> tuple[int, int]:
        """Every bucket a uint32 sent time can fall in."""
        return 0, UINT32_MAX // self.width(table)


async def _collect(store: ArchiveStore, table: str, lo: int, hi: int) -> list[BucketInfo]:
    if lo > hi:
        return []
    return [info async for info in store.list_buckets(table, lo, hi)]


async def list_buckets(
    store: ArchiveStore,
    layout: Layout,
    tables: Sequence[str],
    lower: int,
    upper: int,
    *,
    topic: bytes | None,
    min_bytes: int,
) -> AsyncIterator[BucketInfo]:
    """Partitions of ``tables`` starting in ``[lower, upper]``, filtered by ``topic`` and ``min_bytes``."""
    for table in tables:
        lo, hi = layout.buckets_starting_in(table, lower, upper)
        if lo > hi:
            continue
        async for info in store.list_buckets(table, lo, hi):
            if topic is not None and info.topic != topic:
                continue
            if info.size_bytes >= min_bytes:
                yield info


# ---------------------------------------------------------------------------------------------- stats


@dataclass(frozen=True, slots=True)
class ArchiveStats:
    """What the Stats RPC reports."""

    backend: str
    envelopes: int
    envelope_bytes: int
    oldest_sent: int | None
    newest_sent: int | None
    time_partitions: int
    topic_partitions: int | None  # None: not counted (only an exact Stats scans every topic partition)
    exact: bool


async def collect_stats(store: ArchiveStore, layout: Layout, *, now: int, exact: bool) -> ArchiveStats:
    """Counts from ``store.stats`` plus sizes from a listing of the time table (and the topic table if exact).

    ``exact`` in the result is true only when every figure is: an exact request, an adapter that counted
    (Cassandra estimates past 2048 partitions) and, on SQLite, no expired rows awaiting the cleaner.
    """
    stats = await store.stats(now=now)
    time_parts = await _collect(store, TIME_TABLE, *layout.all_buckets(TIME_TABLE))
    topic_parts = await _collect(store, TOPIC_TABLE, *layout.all_buckets(TOPIC_TABLE)) if exact else None
    counted = not stats.detail.get("estimated") and not stats.detail.get("expired_unpurged")
    return ArchiveStats(
        backend=stats.backend,
        envelopes=stats.envelopes,
        envelope_bytes=sum(b.size_bytes for b in time_parts),
        oldest_sent=stats.oldest_sent,
        newest_sent=stats.newest_sent,
        time_partitions=len(time_parts),
        topic_partitions=None if topic_parts is None else len(topic_parts),
        exact=exact and counted,
    )


# ---------------------------------------------------------------------------------------------- deletes


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    """Per requested partition its size before deletion (0 rows when missing), and the totals."""

    entries: list[BucketInfo]
    found: list[bool]
    rows: int
    bytes: int

    @property
    def missing(self) -> int:
        """Requested partitions that did not exist."""
        return self.found.count(False)


async def delete_buckets(
    store: ArchiveStore, wanted: Sequence[BucketInfo], *, dry_run: bool
) -> DeleteOutcome:
    """Measure each requested partition (``wanted``'s own sizes are ignored), then delete them."""
    sizes: dict[tuple[str, int], dict[tuple[int, bytes | None], BucketInfo]] = {}
    for table, bucket in dict.fromkeys((w.table, w.bucket) for w in wanted):
        listed = await _collect(store, table, bucket, bucket)
        sizes[(table, bucket)] = {(i.shard, i.topic): i for i in listed}
    entries: list[BucketInfo] = []
    found: list[bool] = []
    for w in wanted:
        info = sizes[(w.table, w.bucket)].get((w.shard, w.topic))
        found.append(info is not None)
        entries.append(info if info is not None else BucketInfo(w.table, w.bucket, w.shard, 0, 0, w.topic))
    present = [e for e, ok in zip(entries, found, strict=True) if ok]
    unique = list(dict.fromkeys(present))
    if unique and not dry_run:
        await store.delete_buckets(unique)
    return DeleteOutcome(entries, found, sum(e.rows for e in unique), sum(e.size_bytes for e in unique))


# ---------------------------------------------------------------------------------------------- expire


@dataclass(frozen=True, slots=True)
class ExpireOutcome:
    """Partitions removed (or that would be) and time partitions kept for a longer topic override."""

    removed: list[BucketInfo]
    kept: list[BucketInfo]
    rows: int
    bytes: int


def _floor(value: int, width: int) -> int:
    return value - value % width


async def expire(
    store: ArchiveStore,
    layout: Layout,
    *,
    cutoff: int | None,
    topic_cutoffs: Mapping[bytes, int],
    now: int,
    dry_run: bool,
) -> ExpireOutcome:
    """Remove whole buckets past retention (see the module docstring); ``rows`` is the store's own count.

    ``kept`` lists time partitions past the global cutoff on a day where an override topic that keeps its
    envelopes longer has some (day granularity: the time table does not index topics); the store still
    removes the other topics' rows from them.
    """
    width = layout.bucket_seconds
    global_cut = None if cutoff is None else _floor(cutoff, width)
    cuts = {t: _floor(max(c, 0), DAY_S) for t, c in topic_cutoffs.items()}
    horizon = max([c for c in (global_cut, *cuts.values()) if c is not None], default=0)
    time_parts = await _collect(store, TIME_TABLE, 0, global_cut // width - 1) if global_cut else []
    topic_parts = await _collect(store, TOPIC_TABLE, 0, horizon // DAY_S - 1) if horizon else []

    removed: list[BucketInfo] = []
    kept: list[BucketInfo] = []
    for info in time_parts:
        first = info.bucket * width
        end = first + width
        day = first // DAY_S
        longer = any(
            t.topic in cuts and cuts[t.topic] < end
            for t in topic_parts
            if t.bucket == day and t.topic is not None
        )
        (kept if longer else removed).append(info)
    for info in topic_parts:
        assert info.topic is not None
        limit = cuts.get(info.topic, global_cut)
        if limit is not None and (info.bucket + 1) * DAY_S <= limit:
            removed.append(info)
    result = await store.expire(ExpireRequest(global_cut, cuts, dry_run), now=now)
    removed_bytes = sum(i.size_bytes for i in removed if i.table == TIME_TABLE)
    return ExpireOutcome(removed, kept, result.envelopes, removed_bytes)


# ---------------------------------------------------------------------------------------------- shard plan


@dataclass(frozen=True, slots=True)
class PlanView:
    """The current plan: derived version, the newest entry per (table, bucket), and the default counts."""

    version: int
    entries: list[ShardPlanEntry]
    defaults: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class WantedEntry:
    """One entry of a PutShardPlan request: the count ``table``'s bucket ``bucket`` should have."""

    table: str
    bucket: int
    shards: int
    field: str  # where it came from in the request, for error messages


def plan_version(entries: Sequence[ShardPlanEntry]) -> int:
    """Sum of (generation + 1) over the current entries: 0 without entries; each change raises it."""
    return sum(e.generation + 1 for e in entries)


async def read_plan(store: ArchiveStore, defaults: Mapping[str, int]) -> PlanView:
    """The current plan of both tables."""
    entries: list[ShardPlanEntry] = []
    for table in TABLES:
        newest: dict[int, ShardPlanEntry] = {}
        for e in await store.get_shard_plan(table):
            if e.bucket not in newest or e.generation > newest[e.bucket].generation:
                newest[e.bucket] = e
        entries += [newest[b] for b in sorted(newest)]
    return PlanView(plan_version(entries), entries, dict(defaults))


def plan_changes(current: PlanView, wanted: Sequence[WantedEntry]) -> list[ShardPlanEntry]:
    """The entries to write so the plan becomes ``wanted``; PlanPrecondition for a change it cannot make.

    A raised count moves the bucket to the next generation (readers keep merging every generation, so
    rows written before stay visible); an equal count changes nothing; a lower count, or an existing entry
    left out (the store cannot drop entries), is refused.
    """
    by_key: dict[tuple[str, int], WantedEntry] = {}
    for w in wanted:
        if (w.table, w.bucket) in by_key:
            raise InvalidField(w.field, f"a second entry for {w.table} bucket {w.bucket}")
        by_key[(w.table, w.bucket)] = w
    existing = {(e.table, e.bucket): e for e in current.entries}
    for key, e in existing.items():
        if key not in by_key:
            raise PlanPrecondition(
                f"plan.entries: the entry for {e.table} bucket {e.bucket} ({e.shards} shards) is missing; "
                "existing entries cannot be removed, so a new plan must keep them"
            )
    changes: list[ShardPlanEntry] = []
    for key, w in by_key.items():
        old = existing.get(key)
        count = old.shards if old is not None else current.defaults[w.table]
        if w.shards < count:
            raise PlanPrecondition(
                f"{w.field}: lowering {w.table} bucket {w.bucket} from {count} to {w.shards} shards is "
                "refused (rows written under the larger count would be missed)"
            )
        if w.shards > count:
            generation = 0 if old is None else old.generation
            changes.append(ShardPlanEntry(w.table, w.bucket, generation + 1, w.shards))
    return changes


async def write_plan(
    store: ArchiveStore, defaults: Mapping[str, int], wanted: Sequence[WantedEntry], expected_version: int
) -> int:
    """Apply ``wanted`` if the plan is still at ``expected_version``; returns the version now in force.

    The version check and the write are not atomic (the storage protocol has no compare-and-set): two
    concurrent writers can both pass the check; README "Decisions".
    """
    current = await read_plan(store, defaults)
    if current.version != expected_version:
        raise PlanConflict(expected_version, current.version)
    changes = plan_changes(current, wanted)
    if changes:
        await store.put_shard_plan(changes)
    merged = {(e.table, e.bucket): e for e in current.entries} | {(e.table, e.bucket): e for e in changes}
    return plan_version(list(merged.values()))
