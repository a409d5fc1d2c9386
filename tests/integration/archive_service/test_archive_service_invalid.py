"""Malformed requests get INVALID_ARGUMENT over real gRPC, with a message naming the field and the rule.

Validation runs before the store is touched and is the same code for both backends, so the table runs on
SQLite; one case per backend checks it end to end on Cassandra too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeAlias

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from mailmesh.archive.v1 import archive_pb2 as pb
from mailmesh.archive.v1 import archive_pb2_grpc
from mailmesh.common.v1 import common_pb2
from tests.integration.archive_service.archive_service_support import (
    BASE,
    A,
    Running,
    collect,
    expect_status,
    start_archive,
    time_range,
)

pytestmark = pytest.mark.timeout(120)

Stub: TypeAlias = "archive_pb2_grpc.ArchiveServiceAsyncStub"  # typing-only class
H32 = b"\x01" * 32
TIME, TOPIC = pb.BUCKET_TABLE_TIME, pb.BUCKET_TABLE_TOPIC


def _query(**fields: Any) -> pb.QueryEnvelopesRequest:
    base: dict[str, Any] = {"range": time_range(), "limit": 10}
    base.update(fields)
    return pb.QueryEnvelopesRequest(**base)


def _plan(**changes: Any) -> Callable[[Stub], Awaitable[Any]]:
    """PutShardPlan with a valid SQLite plan (defaults 1/1, widths 3600/86400) changed by ``changes``."""

    async def call(stub: Stub) -> Any:
        plan = pb.ShardPlan(
            default_time_shards=1,
            default_topic_shards=1,
            time_bucket_width=Duration(seconds=3600),
            topic_bucket_width=Duration(seconds=86400),
        )
        entries = changes.pop("entries", [])
        for name, value in changes.items():
            field = getattr(plan, name)
            if isinstance(field, Duration):
                field.CopyFrom(value)
            else:
                setattr(plan, name, value)
        plan.entries.extend(entries)
        return await stub.PutShardPlan(pb.PutShardPlanRequest(plan=plan))

    return call


def _entry(**fields: Any) -> pb.ShardPlanEntry:
    base: dict[str, Any] = {"table": TIME, "bucket_start": 7200, "shards": 2}
    base.update(fields)
    return pb.ShardPlanEntry(**base)


def _list(request: pb.ListBucketsRequest) -> Callable[[Stub], Awaitable[Any]]:
    async def call(stub: Stub) -> Any:
        return await collect(lambda: stub.ListBuckets(request))

    return call


def _key(**fields: Any) -> pb.BucketKey:
    base: dict[str, Any] = {"table": TIME, "bucket_start": 3600}
    base.update(fields)
    return pb.BucketKey(**base)


def _retention(topic: bytes = A, seconds: int = 60) -> pb.TopicRetention:
    return pb.TopicRetention(topic=topic, retention=Duration(seconds=seconds))


CASES: list[tuple[str, Callable[[Stub], Awaitable[Any]], str]] = [
    # PutEnvelopes
    (
        "put-empty",
        lambda s: s.PutEnvelopes(pb.PutEnvelopesRequest()),
        "items: must hold 1 to 1000 items, got 0",
    ),
    (
        "put-too-many",
        lambda s: s.PutEnvelopes(pb.PutEnvelopesRequest(items=[pb.PutItem()] * 1001)),
        "items: must hold 1 to 1000 items, got 1001",
    ),
    # GetEnvelope
    (
        "get-no-key",
        lambda s: s.GetEnvelope(pb.GetEnvelopeRequest()),
        "key: set envelope_hash or message_hash",
    ),
    (
        "get-short-hash",
        lambda s: s.GetEnvelope(pb.GetEnvelopeRequest(envelope_hash=b"\x01" * 31)),
        "envelope_hash: must be 32 bytes, got 31",
    ),
    (
        "get-empty-message-hash",
        lambda s: s.GetEnvelope(pb.GetEnvelopeRequest(message_hash=b"")),
        "message_hash: must be 32 bytes, got 0",
    ),
    (
        "get-unknown-view",
        lambda s: s.GetEnvelope(pb.GetEnvelopeRequest(envelope_hash=H32, view=9)),  # type: ignore[arg-type]
        "view: unknown value 9",
    ),
    # QueryEnvelopes
    ("query-no-range", lambda s: s.QueryEnvelopes(pb.QueryEnvelopesRequest(limit=10)), "range: required"),
    (
        "query-inverted-range",
        lambda s: s.QueryEnvelopes(_query(range=time_range(BASE + 1, BASE))),
        f"query range is invalid: lower > upper (range: {BASE + 1} > {BASE})",
    ),
    ("query-limit-0", lambda s: s.QueryEnvelopes(_query(limit=0)), "limit: must be 1 to 1000, got 0"),
    (
        "query-limit-1001",
        lambda s: s.QueryEnvelopes(_query(limit=1001)),
        "limit: must be 1 to 1000, got 1001",
    ),
    (
        "query-short-topic",
        lambda s: s.QueryEnvelopes(_query(topics=[A, b"\x01\x02\x03"])),
        "topics[1]: must be 4 bytes, got 3",
    ),
    (
        "query-too-many-topics",
        lambda s: s.QueryEnvelopes(_query(topics=[i.to_bytes(4, "big") for i in range(10_001)])),
        "topics: must hold 0 to 10000 topics, got 10001",
    ),
    (
        "query-bloom-63",
        lambda s: s.QueryEnvelopes(_query(bloom=b"\xff" * 63)),
        "bloom: must be empty or 64 bytes, got 63",
    ),
    (
        "query-long-position",
        lambda s: s.QueryEnvelopes(_query(after=common_pb2.Position(sent=BASE, hash=b"\x01" * 33))),
        "after.hash: must be 1 to 32 bytes (a shorter hash is a prefix), got 33",
    ),
    (
        "query-empty-position",
        lambda s: s.QueryEnvelopes(_query(after=common_pb2.Position(sent=BASE))),
        "after.hash: must be 1 to 32 bytes (a shorter hash is a prefix), got 0",
    ),
    ("query-direction", lambda s: s.QueryEnvelopes(_query(direction=7)), "direction: unknown value 7"),
    (
        "query-max-bytes",
        lambda s: s.QueryEnvelopes(_query(max_bytes=64 * 1024 * 1024 + 1)),
        "max_bytes: must be at most 67108864, got 67108865",
    ),
    # ContainsEnvelopes
    (
        "contains-too-many",
        lambda s: s.ContainsEnvelopes(
            pb.ContainsEnvelopesRequest(envelope_hashes=[H32] * 600, message_hashes=[H32] * 401)
        ),
        "envelope_hashes + message_hashes: must hold 0 to 1000 hashes, got 1001",
    ),
    (
        "contains-short",
        lambda s: s.ContainsEnvelopes(pb.ContainsEnvelopesRequest(message_hashes=[H32, b"x"])),
        "message_hashes[1]: must be 32 bytes, got 1",
    ),
    # ListBuckets
    ("list-table", _list(pb.ListBucketsRequest(table=5)), "table: unknown value 5"),  # type: ignore[arg-type]
    ("list-topic", _list(pb.ListBucketsRequest(topic=b"\x01")), "topic: must be 4 bytes, got 1"),
    (
        "list-time-topic",
        _list(pb.ListBucketsRequest(table=TIME, topic=A)),
        "topic: filters BUCKET_TABLE_TOPIC buckets; it cannot be used with BUCKET_TABLE_TIME",
    ),
    (
        "list-range",
        _list(pb.ListBucketsRequest(range=time_range(10, 9))),
        "query range is invalid: lower > upper (range: 10 > 9)",
    ),
    # DeleteBuckets
    (
        "delete-no-table",
        lambda s: s.DeleteBuckets(pb.DeleteBucketsRequest(buckets=[_key(table=0)])),
        "buckets[0].table: must be BUCKET_TABLE_TIME or BUCKET_TABLE_TOPIC",
    ),
    (
        "delete-unaligned",
        lambda s: s.DeleteBuckets(pb.DeleteBucketsRequest(buckets=[_key(), _key(bucket_start=3601)])),
        "buckets[1].bucket_start: 3601 is not aligned to the 3600-second buckets of envelopes_by_time",
    ),
    (
        "delete-time-topic",
        lambda s: s.DeleteBuckets(pb.DeleteBucketsRequest(buckets=[_key(topic=A)])),
        "buckets[0].topic: must be empty for BUCKET_TABLE_TIME",
    ),
    (
        "delete-topic-no-topic",
        lambda s: s.DeleteBuckets(pb.DeleteBucketsRequest(buckets=[_key(table=TOPIC, bucket_start=86400)])),
        "buckets[0].topic: must be 4 bytes, got 0",
    ),
    (
        "delete-too-many",
        lambda s: s.DeleteBuckets(pb.DeleteBucketsRequest(buckets=[_key()] * 10_001)),
        "buckets: must hold 0 to 10000 buckets, got 10001",
    ),
    # PutShardPlan
    ("plan-missing", lambda s: s.PutShardPlan(pb.PutShardPlanRequest()), "plan: required"),
    (
        "plan-width",
        _plan(time_bucket_width=Duration(seconds=60)),
        "plan.time_bucket_width: is fixed at 3600s by the schema; echo it",
    ),
    (
        "plan-defaults",
        _plan(default_topic_shards=3),
        "plan.default_topic_shards: is fixed at 1 by ARCHIVE_DEFAULT_SHARDS; echo it",
    ),
    ("plan-shards-0", _plan(entries=[_entry(shards=0)]), "plan.entries[0].shards: must be 1 to 1024, got 0"),
    (
        "plan-shards-2000",
        _plan(entries=[_entry(shards=2000)]),
        "plan.entries[0].shards: must be 1 to 1024, got 2000",
    ),
    (
        "plan-topic",
        _plan(entries=[_entry(table=TOPIC, bucket_start=86400, topic=A)]),
        "plan.entries[0].topic: per-topic entries are not supported",
    ),
    (
        "plan-unaligned",
        _plan(entries=[_entry(table=TOPIC, bucket_start=3600)]),
        "plan.entries[0].bucket_start: 3600 is not aligned to the 86400-second buckets of envelopes_by_topic",
    ),
    (
        "plan-duplicate",
        _plan(entries=[_entry(), _entry(shards=3)]),
        "plan.entries[1]: a second entry for envelopes_by_time bucket 2",
    ),
    ("plan-updated-by", _plan(updated_by="x" * 257), "plan.updated_by: must be at most 256 bytes"),
    # Expire
    (
        "expire-topic",
        lambda s: s.Expire(pb.ExpireRequest(topic_retention=[_retention(topic=b"\x01\x02")])),
        "topic_retention[0].topic: must be 4 bytes, got 2",
    ),
    (
        "expire-zero-retention",
        lambda s: s.Expire(pb.ExpireRequest(topic_retention=[_retention(seconds=0)])),
        "topic_retention[0].retention: must be > 0",
    ),
    (
        "expire-twice",
        lambda s: s.Expire(pb.ExpireRequest(topic_retention=[_retention(), _retention()])),
        f"topic_retention[1].topic: 0x{A.hex()} is given twice",
    ),
]


@pytest.fixture
async def sqlite_archive(tmp_path: Path) -> AsyncIterator[Running]:
    running = await start_archive({"ARCHIVE_SQLITE_PATH": str(tmp_path / "archive.sqlite3")})
    try:
        yield running
    finally:
        await running.close()


@pytest.mark.parametrize(("call", "message"), [pytest.param(c, m, id=i) for i, c, m in CASES])
async def test_invalid_request_is_invalid_argument_with_a_clear_message(
    sqlite_archive: Running, call: Callable[[Stub], Awaitable[Any]], message: str
) -> None:
    got = await expect_status(grpc.StatusCode.INVALID_ARGUMENT, call(sqlite_archive.stub))
    assert got.startswith(message), got


async def test_invalid_arguments_on_each_backend(archive: Running) -> None:
    got = await expect_status(
        grpc.StatusCode.INVALID_ARGUMENT,
        archive.stub.QueryEnvelopes(_query(range=time_range(BASE + 1, BASE))),
    )
    assert got.startswith("query range is invalid: lower > upper")
    got = await expect_status(
        grpc.StatusCode.INVALID_ARGUMENT,
        archive.stub.GetEnvelope(pb.GetEnvelopeRequest(envelope_hash=b"\x00" * 3)),
    )
    assert got == "envelope_hash: must be 32 bytes, got 3"
