"""Maintenance logic (buckets, stats, deletes, expiry, shard plan) against the in-memory reference store."""

from __future__ import annotations

import hashlib

import pytest

from archivestore.retention import RetentionPolicy
from archivestore.types import (
    BucketInfo,
    ExpireRequest,
    ExpireResult,
    PutItem,
    ShardPlanEntry,
    StoredEnvelope,
)
from services.archive import maintenance as mt
from services.archive.errors import InvalidField, PlanConflict, PlanPrecondition
from tests.integration.archive.model import ModelStore
from wakucodec.envelope import make_envelope

DAY = 86_400
DAY0 = 1_699_920_000  # a midnight
A, B = bytes.fromhex("aabbccdd"), bytes.fromhex("01020304")
LAYOUT = mt.Layout(3600)
DEFAULTS = {mt.TIME_TABLE: 4, mt.TOPIC_TABLE: 1}


def stored(sent: int, topic: bytes, n: int = 0) -> StoredEnvelope:
    data = hashlib.sha256(f"{sent}{topic.hex()}{n}".encode()).digest()
    e = make_envelope(expiry=sent + 50, ttl=50, topic=topic, data=data, nonce=n)
    return StoredEnvelope(e.sent, e.hash, e.topic, e.expiry, e.raw)


class RecordingStore(ModelStore):
    """The reference store, keeping the last ExpireRequest it saw."""

    def __init__(self) -> None:
        super().__init__(RetentionPolicy(default_s=None))
        self.expired: list[ExpireRequest] = []

    async def expire(self, request: ExpireRequest, *, now: int) -> ExpireResult:
        self.expired.append(request)
        return await super().expire(request, now=now)


async def store_with(envs: list[StoredEnvelope]) -> RecordingStore:
    store = RecordingStore()
    await store.put([PutItem(e) for e in envs], now=DAY0)
    return store


def test_layout_maps_bucket_starts_and_ranges() -> None:
    assert (LAYOUT.width(mt.TIME_TABLE), LAYOUT.width(mt.TOPIC_TABLE)) == (3600, DAY)
    assert LAYOUT.bucket_at(mt.TIME_TABLE, 7200, "f") == 2
    assert LAYOUT.start_of(mt.TOPIC_TABLE, 3) == 3 * DAY
    with pytest.raises(InvalidField, match=r"^f: 7201 is not aligned to the 3600-second buckets"):
        LAYOUT.bucket_at(mt.TIME_TABLE, 7201, "f")
    assert LAYOUT.buckets_starting_in(mt.TIME_TABLE, 3600, 7199) == (1, 1)
    assert LAYOUT.buckets_starting_in(mt.TIME_TABLE, 3601, 7199) == (2, 1)  # empty
    assert LAYOUT.all_buckets(mt.TOPIC_TABLE) == (0, (2**32 - 1) // DAY)


async def test_stats_add_bytes_and_partitions_to_the_store_counts() -> None:
    envs = [stored(DAY0 + i * 1800, (A, B)[i % 2], i) for i in range(6)]  # 3 hours, 2 topics, 1 day
    store = await store_with(envs)
    exact = await mt.collect_stats(store, LAYOUT, now=DAY0, exact=True)
    assert (exact.envelopes, exact.envelope_bytes) == (6, sum(len(e.raw) for e in envs))
    assert (exact.time_partitions, exact.topic_partitions, exact.exact) == (3, 2, True)
    assert (exact.oldest_sent, exact.newest_sent) == (DAY0, DAY0 + 5 * 1800)
    quick = await mt.collect_stats(store, LAYOUT, now=DAY0, exact=False)
    assert (quick.topic_partitions, quick.exact, quick.envelopes) == (None, False, 6)


async def test_list_buckets_filters_by_range_topic_and_size() -> None:
    envs = [stored(DAY0 + i * 1800, (A, B)[i % 2], i) for i in range(6)]
    store = await store_with(envs)

    async def listed(tables: tuple[str, ...], lower: int, upper: int, **kw: object) -> list[BucketInfo]:
        return [b async for b in mt.list_buckets(store, LAYOUT, tables, lower, upper, **kw)]  # type: ignore[arg-type]

    every = await listed(mt.TABLES, 0, 2**32 - 1, topic=None, min_bytes=0)
    assert [(b.table, b.bucket) for b in every][:3] == [(mt.TIME_TABLE, DAY0 // 3600 + h) for h in range(3)]
    assert len(every) == 5
    only_b = await listed((mt.TOPIC_TABLE,), 0, 2**32 - 1, topic=B, min_bytes=0)
    assert [(b.topic, b.rows) for b in only_b] == [(B, 3)]
    second_hour = await listed((mt.TIME_TABLE,), DAY0 + 1, DAY0 + 3600, topic=None, min_bytes=0)
    assert [b.bucket for b in second_hour] == [DAY0 // 3600 + 1]
    assert await listed(mt.TABLES, 0, 2**32 - 1, topic=None, min_bytes=10**6) == []


async def test_delete_buckets_measures_first_and_reports_missing() -> None:
    envs = [stored(DAY0 + i, A, i) for i in range(3)] + [stored(DAY0 + 3600, B)]
    store = await store_with(envs)
    first = BucketInfo(mt.TIME_TABLE, DAY0 // 3600, 0, 0, 0)
    absent = BucketInfo(mt.TIME_TABLE, DAY0 // 3600 - 100, 0, 0, 0)
    dry = await mt.delete_buckets(store, [first, absent, first], dry_run=True)
    assert dry.found == [True, False, True] and dry.missing == 1
    assert [e.rows for e in dry.entries] == [3, 0, 3]
    assert (dry.rows, dry.bytes) == (3, sum(len(e.raw) for e in envs[:3]))  # a repeated key counts once
    assert (await store.stats(now=DAY0)).envelopes == 4
    real = await mt.delete_buckets(store, [first], dry_run=False)
    assert real.rows == 3 and (await store.stats(now=DAY0)).envelopes == 1


async def test_expire_rounds_cutoffs_down_to_whole_buckets() -> None:
    envs = [
        stored(DAY0 + 10, A),
        stored(DAY0 + 3610, A, 1),
        stored(DAY0 + 20, B),
        stored(DAY0 + 2 * DAY, A, 2),
    ]
    store = await store_with(envs)
    out = await mt.expire(
        store, LAYOUT, cutoff=DAY0 + 3600 + 1800, topic_cutoffs={B: DAY0 + DAY + 5}, now=DAY0, dry_run=True
    )
    assert store.expired[-1] == ExpireRequest(DAY0 + 3600, {B: DAY0 + DAY}, True)
    assert out.rows == 2  # A at +10 (bucket below the rounded cutoff) and B (its day is below B's cutoff)
    assert {(i.table, i.bucket, i.topic) for i in out.removed} == {
        (mt.TIME_TABLE, DAY0 // 3600, None),
        (mt.TOPIC_TABLE, DAY0 // DAY, B),
    }
    assert out.kept == [] and out.bytes == len(envs[0].raw) + len(envs[2].raw)
    assert (await store.stats(now=DAY0)).envelopes == 4  # dry run


async def test_expire_keeps_time_buckets_a_longer_override_still_needs() -> None:
    envs = [stored(DAY0 + 10, A), stored(DAY0 + 20, B)]
    store = await store_with(envs)
    out = await mt.expire(
        store, LAYOUT, cutoff=DAY0 + 2 * DAY, topic_cutoffs={B: DAY0 - DAY}, now=DAY0, dry_run=False
    )
    assert [(i.table, i.bucket) for i in out.kept] == [(mt.TIME_TABLE, DAY0 // 3600)]
    assert [(i.table, i.topic) for i in out.removed] == [(mt.TOPIC_TABLE, A)]
    assert out.rows == 1 and await store.contains([envs[0].hash, envs[1].hash], now=DAY0) == [False, True]
    nothing = await mt.expire(store, LAYOUT, cutoff=None, topic_cutoffs={}, now=DAY0, dry_run=False)
    assert (nothing.rows, nothing.removed, nothing.kept) == (0, [], [])


def view(*entries: ShardPlanEntry) -> mt.PlanView:
    return mt.PlanView(mt.plan_version(list(entries)), list(entries), DEFAULTS)


def wanted(table: str, bucket: int, shards: int, field: str = "e") -> mt.WantedEntry:
    return mt.WantedEntry(table, bucket, shards, field)


def test_plan_changes_raise_counts_under_a_new_generation() -> None:
    current = view(ShardPlanEntry(mt.TIME_TABLE, 10, 1, 8))
    assert current.version == 2
    changes = mt.plan_changes(
        current,
        [wanted(mt.TIME_TABLE, 10, 16), wanted(mt.TIME_TABLE, 11, 4), wanted(mt.TOPIC_TABLE, 5, 2)],
    )
    # bucket 11 asks for the default count: nothing to write.
    assert changes == [ShardPlanEntry(mt.TIME_TABLE, 10, 2, 16), ShardPlanEntry(mt.TOPIC_TABLE, 5, 1, 2)]
    assert mt.plan_changes(current, [wanted(mt.TIME_TABLE, 10, 8)]) == []


@pytest.mark.parametrize(
    ("entries", "error", "message"),
    [
        (
            [wanted(mt.TIME_TABLE, 10, 4)],
            PlanPrecondition,
            "e: lowering envelopes_by_time bucket 10 from 8 to 4",
        ),
        ([wanted(mt.TIME_TABLE, 12, 2)], PlanPrecondition, "the entry for envelopes_by_time bucket 10"),
        (
            [wanted(mt.TIME_TABLE, 10, 8), wanted(mt.TIME_TABLE, 12, 2, "x")],
            PlanPrecondition,
            "x: lowering envelopes_by_time bucket 12 from 4 to 2",
        ),
        (
            [wanted(mt.TIME_TABLE, 10, 8), wanted(mt.TIME_TABLE, 10, 9, "d")],
            InvalidField,
            "d: a second entry for envelopes_by_time bucket 10",
        ),
    ],
)
def test_plan_changes_refuse_what_would_break_readers(
    entries: list[mt.WantedEntry], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        mt.plan_changes(view(ShardPlanEntry(mt.TIME_TABLE, 10, 1, 8)), entries)


async def test_write_plan_checks_the_version_then_publishes() -> None:
    store = await store_with([])
    assert (await mt.read_plan(store, DEFAULTS)).version == 0
    version = await mt.write_plan(store, DEFAULTS, [wanted(mt.TIME_TABLE, 7, 8)], 0)
    assert version == 2 and await store.get_shard_plan(mt.TIME_TABLE) == [
        ShardPlanEntry(mt.TIME_TABLE, 7, 1, 8)
    ]
    with pytest.raises(PlanConflict, match="expected_version 0, current version 2") as info:
        await mt.write_plan(store, DEFAULTS, [wanted(mt.TIME_TABLE, 7, 8)], 0)
    assert info.value.details["reason"] == "VERSION_CONFLICT"
    assert await mt.write_plan(store, DEFAULTS, [wanted(mt.TIME_TABLE, 7, 8)], 2) == 2  # no change
    assert await mt.write_plan(store, DEFAULTS, [wanted(mt.TIME_TABLE, 7, 9)], 2) == 3
    plan = await mt.read_plan(store, DEFAULTS)
    assert plan.entries == [ShardPlanEntry(mt.TIME_TABLE, 7, 2, 9)] and plan.defaults == DEFAULTS
