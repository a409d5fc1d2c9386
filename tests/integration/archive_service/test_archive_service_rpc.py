"""Every ArchiveService RPC over real gRPC against both backends: writes, reads, paging, maintenance."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from mailmesh.archive.v1 import archive_pb2 as pb
from mailmesh.common.v1 import common_pb2
from tests.integration.archive_service.archive_service_support import (
    BASE,
    DAY,
    HOUR,
    TOPICS,
    A,
    B,
    C,
    Running,
    collect,
    envelope,
    envelope_proto,
    expect_status,
    ordered,
    put,
    put_item,
    time_range,
)
from wakucodec import rlp
from wakucodec.bloom import bloom_match, topic_to_bloom
from wakucodec.envelope import make_envelope
from wakucodec.keccak import keccak256

pytestmark = pytest.mark.timeout(300)

INS, DUP, INV = pb.PUT_OUTCOME_INSERTED, pb.PUT_OUTCOME_DUPLICATE, pb.PUT_OUTCOME_INVALID
HOUR0 = BASE - BASE % DAY + 10 * HOUR  # 10:00 on the day of BASE: a few hours fit in one day
FWD, BWD = common_pb2.DIRECTION_FORWARD, common_pb2.DIRECTION_BACKWARD


# ------------------------------------------------------------------------------------------ writes / reads


async def test_put_then_get_by_envelope_hash_and_message_hash(archive: Running) -> None:
    a, b = envelope(BASE, A, 1, size=300), envelope(BASE + 5, B, 2)
    mh = b"\x11" * 32
    reply = await archive.stub.PutEnvelopes(
        pb.PutEnvelopesRequest(items=[put_item(a, message_hash=mh), put_item(b)])
    )
    assert (reply.inserted, reply.duplicates, reply.invalid) == (2, 0, 0)
    assert [(r.hash, r.outcome, r.detail) for r in reply.results] == [(a.hash, INS, ""), (b.hash, INS, "")]

    full = await archive.stub.GetEnvelope(pb.GetEnvelopeRequest(envelope_hash=a.hash))
    assert full.envelope == envelope_proto(a, data=a.data)  # every field derived from the RLP, pow included
    assert full.message_hash == mh
    no_data = await archive.stub.GetEnvelope(
        pb.GetEnvelopeRequest(message_hash=mh, view=pb.ENVELOPE_VIEW_NO_DATA)
    )
    assert no_data.envelope == envelope_proto(a)
    plain = await archive.stub.GetEnvelope(
        pb.GetEnvelopeRequest(envelope_hash=b.hash, view=pb.ENVELOPE_VIEW_FULL)
    )
    assert plain.envelope.rlp == b.raw and plain.envelope.data == b.data and plain.message_hash == b""


async def test_get_of_an_absent_envelope_is_not_found(archive: Running) -> None:
    message = await expect_status(
        grpc.StatusCode.NOT_FOUND, archive.stub.GetEnvelope(pb.GetEnvelopeRequest(envelope_hash=b"\x42" * 32))
    )
    assert message == f"no archived envelope with envelope hash 0x{'42' * 32}"
    message = await expect_status(
        grpc.StatusCode.NOT_FOUND, archive.stub.GetEnvelope(pb.GetEnvelopeRequest(message_hash=b"\x43" * 32))
    )
    assert message.startswith("no archived envelope with message hash 0x4343")


async def test_reingest_is_idempotent_across_and_within_batches(archive: Running) -> None:
    envs = [envelope(BASE + i, TOPICS[i % 3], i) for i in range(10)]
    assert (await put(archive.stub, envs)).inserted == 10
    again = await archive.stub.PutEnvelopes(
        pb.PutEnvelopesRequest(items=[put_item(e) for e in reversed(envs)] + [put_item(envs[0])])
    )
    assert (again.inserted, again.duplicates, again.invalid) == (0, 11, 0)
    assert [r.outcome for r in again.results] == [DUP] * 11
    fresh = envelope(BASE + 99, A, 99)
    twice = await archive.stub.PutEnvelopes(pb.PutEnvelopesRequest(items=[put_item(fresh), put_item(fresh)]))
    assert [r.outcome for r in twice.results] == [INS, DUP]
    stats = await archive.stub.Stats(pb.StatsRequest(exact=True))
    assert stats.envelope_count == 11


async def test_an_item_whose_rlp_or_hash_is_wrong_is_refused_and_the_rest_stored(archive: Running) -> None:
    good = [envelope(BASE + i, A, i) for i in range(10)]
    wraps = make_envelope(expiry=100, ttl=200, topic=A, data=b"wrap")
    zero_retention = put_item(good[8])
    zero_retention.retention.SetInParent()  # set, but 0 s
    # Each with its own correct hash: the archive checks the RLP's form, not only that the hash fits.
    e2, e3, e7 = good[2], good[3], good[7]
    padded = rlp.encode([b"\x00" + e2.expiry.to_bytes(4, "big"), e2.ttl, e2.topic, e2.data, e2.nonce])
    trailing = e3.raw + b"\x00"
    six = rlp.encode([e7.expiry, e7.ttl, e7.topic, e7.data, e7.nonce, b"extra"])
    items = [
        put_item(good[0]),
        put_item(good[1], hash=good[0].hash),
        put_item(e2, rlp=padded, hash=keccak256(padded)),
        put_item(e3, rlp=trailing, hash=keccak256(trailing)),
        put_item(good[4], rlp=b"\xc0"),
        put_item(good[5], hash=b"\x01" * 31),
        put_item(good[6], message_hash=b"\x02" * 5),
        put_item(e7, rlp=six, hash=keccak256(six)),
        zero_retention,
        pb.PutItem(),
        put_item(good[9], rlp=b""),
        put_item(wraps),  # ttl > expiry: Go's uint32 sent would wrap around
    ]
    reply = await archive.stub.PutEnvelopes(pb.PutEnvelopesRequest(items=items))
    assert (reply.inserted, reply.duplicates, reply.invalid) == (1, 0, 11)
    details = [r.detail for r in reply.results]
    assert [r.outcome for r in reply.results] == [INS] + [INV] * 11
    assert details[0] == ""
    assert details[1].startswith("hash: is not keccak256(rlp)")
    assert details[2].startswith("rlp: not a canonical Waku envelope")
    assert details[3].startswith("rlp: not a canonical Waku envelope")
    assert details[4].startswith("rlp: not a canonical Waku envelope")
    assert details[5] == "hash: must be 32 bytes, got 31"
    assert details[6] == "message_hash: must be empty or 32 bytes, got 5"
    assert details[7].startswith("rlp: not a canonical Waku envelope")
    assert details[8] == "retention: must be > 0"
    assert details[9] == details[10] == "rlp: required"
    assert details[11].startswith("rlp: ttl") and "exceeds expiry" in details[11]
    assert reply.results[1].hash == good[0].hash  # the hash as given
    asked = [e.hash for e in good]
    present = await archive.stub.ContainsEnvelopes(pb.ContainsEnvelopesRequest(envelope_hashes=asked))
    assert list(present.present_envelope_hashes) == [good[0].hash]


async def test_query_filters_by_range_topics_and_bloom(archive: Running) -> None:
    envs = [envelope(BASE + i, TOPICS[i % 3], i) for i in range(30)]
    await put(archive.stub, envs)

    async def hashes(**fields: object) -> list[bytes]:
        reply = await archive.stub.QueryEnvelopes(pb.QueryEnvelopesRequest(limit=1000, **fields))  # type: ignore[arg-type]
        assert not reply.has_more
        return [e.hash for e in reply.envelopes]

    assert await hashes(range=time_range()) == ordered(envs)  # no topics, no bloom: everything
    assert await hashes(range=time_range(), topics=[A, C]) == ordered([e for e in envs if e.topic in (A, C)])
    bloom = topic_to_bloom(B)
    want = [e for e in envs if bloom_match(bloom, topic_to_bloom(e.topic))]
    assert await hashes(range=time_range(), bloom=bloom) == ordered(want)
    assert await hashes(range=time_range(), topics=[C], bloom=topic_to_bloom(A)) == ordered(  # topics win
        [e for e in envs if e.topic == C]
    )
    assert await hashes(range=time_range(BASE + 10, BASE + 19)) == ordered(envs[10:20])  # both ends inclusive
    assert await hashes(range=time_range(BASE + 10, BASE + 10)) == [envs[10].hash]
    assert await hashes(range=time_range(BASE + 40, BASE + 50)) == []
    no_data = await archive.stub.QueryEnvelopes(
        pb.QueryEnvelopesRequest(range=time_range(), limit=3, view=pb.ENVELOPE_VIEW_NO_DATA)
    )
    full = await archive.stub.QueryEnvelopes(pb.QueryEnvelopesRequest(range=time_range(), limit=3))
    assert [m.data for m in no_data.envelopes] == [b""] * 3
    by_hash = {e.hash: e for e in envs}
    assert list(full.envelopes) == [
        envelope_proto(by_hash[m.hash], data=by_hash[m.hash].data) for m in full.envelopes
    ]


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
async def test_pages_follow_positions_without_gaps_or_duplicates(archive: Running, backward: bool) -> None:
    # 54 matching envelopes over two hour buckets, several per second, two topics of three.
    envs = [envelope(HOUR0 + (i // 3) * 211, TOPICS[i % 3], i) for i in range(80)]
    await put(archive.stub, envs)
    wanted = [e for e in envs if e.topic != C]
    expected = ordered(wanted, backward=backward)
    assert len(expected) == 54
    seen: list[bytes] = []
    after: common_pb2.Position | None = None
    pages = 0
    while True:
        request = pb.QueryEnvelopesRequest(
            range=time_range(HOUR0, HOUR0 + 3 * HOUR),
            topics=[A, B],
            limit=10,
            direction=BWD if backward else FWD,
        )
        if after is not None:
            request.after.CopyFrom(after)
        reply = await archive.stub.QueryEnvelopes(request)
        pages += 1
        seen += [e.hash for e in reply.envelopes]
        assert reply.last.hash == reply.envelopes[-1].hash and reply.last.sent == reply.envelopes[-1].sent
        if not reply.has_more:
            break
        assert len(reply.envelopes) == 10
        # Resume as history-query does from a 36-byte cursor: sent + the first 16 hash bytes.
        after = common_pb2.Position(sent=reply.last.sent, hash=reply.last.hash[:16])
    assert pages == 6
    assert seen == expected


async def test_a_byte_budget_ends_a_page_early_but_never_empty(archive: Running) -> None:
    envs = [envelope(BASE + i, A, i, size=1000) for i in range(10)]
    await put(archive.stub, envs)
    rlp = len(envs[0].raw)
    seen: list[bytes] = []
    after = None
    while True:
        request = pb.QueryEnvelopesRequest(range=time_range(), limit=1000, max_bytes=2 * rlp + rlp // 2)
        if after is not None:
            request.after.CopyFrom(after)
        reply = await archive.stub.QueryEnvelopes(request)
        seen += [e.hash for e in reply.envelopes]
        if not reply.has_more:
            assert len(reply.envelopes) <= 2
            break
        assert len(reply.envelopes) == 2
        after = reply.last
    assert seen == ordered(envs)
    tiny = await archive.stub.QueryEnvelopes(
        pb.QueryEnvelopesRequest(range=time_range(), limit=5, max_bytes=10)
    )
    assert [e.hash for e in tiny.envelopes] == ordered(envs)[:1] and tiny.has_more


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
async def test_packed_view_returns_the_same_page_as_columns(archive: Running, backward: bool) -> None:
    envs = [envelope(BASE + i // 2, TOPICS[i % 3], i, size=100 + 37 * i) for i in range(30)]
    await put(archive.stub, envs)

    def request(view: pb.EnvelopeView.ValueType) -> pb.QueryEnvelopesRequest:
        return pb.QueryEnvelopesRequest(
            range=time_range(), topics=[A, B], limit=12, direction=BWD if backward else FWD, view=view
        )

    keys = await archive.stub.QueryEnvelopes(request(pb.ENVELOPE_VIEW_KEYS))
    packed = await archive.stub.QueryEnvelopes(request(pb.ENVELOPE_VIEW_PACKED))
    assert len(packed.envelopes) == 0 and not keys.HasField("packed")
    columns = packed.packed
    assert list(columns.rlp_sizes) == [len(e.rlp) for e in keys.envelopes]
    assert columns.rlp == b"".join(e.rlp for e in keys.envelopes)
    assert list(columns.sent) == [e.sent for e in keys.envelopes]
    assert columns.hashes == b"".join(e.hash for e in keys.envelopes)
    assert (packed.has_more, packed.last) == (keys.has_more, keys.last)
    assert [e.hash for e in keys.envelopes] == ordered([e for e in envs if e.topic != C], backward=backward)[
        :12
    ]


async def test_packed_view_keeps_the_byte_budget(archive: Running) -> None:
    envs = [envelope(BASE + i, A, i, size=1000) for i in range(5)]
    await put(archive.stub, envs)
    rlp = len(envs[0].raw)
    reply = await archive.stub.QueryEnvelopes(
        pb.QueryEnvelopesRequest(range=time_range(), limit=5, max_bytes=2 * rlp, view=pb.ENVELOPE_VIEW_PACKED)
    )
    assert list(reply.packed.rlp_sizes) == [rlp, rlp] and reply.has_more
    assert reply.last.hash == reply.packed.hashes[32:] == ordered(envs)[1]


async def test_get_with_the_packed_view_answers_with_keys(archive: Running) -> None:
    a = envelope(BASE, A, 1)
    await put(archive.stub, [a])
    keys = await archive.stub.GetEnvelope(
        pb.GetEnvelopeRequest(envelope_hash=a.hash, view=pb.ENVELOPE_VIEW_KEYS)
    )
    packed = await archive.stub.GetEnvelope(
        pb.GetEnvelopeRequest(envelope_hash=a.hash, view=pb.ENVELOPE_VIEW_PACKED)
    )
    assert packed.envelope == keys.envelope and packed.envelope.rlp == a.raw


async def test_contains_lists_present_hashes_in_request_order(archive: Running) -> None:
    a, b = envelope(BASE, A, 1), envelope(BASE + 1, B, 2)
    mh = b"\x33" * 32
    await archive.stub.PutEnvelopes(pb.PutEnvelopesRequest(items=[put_item(a, message_hash=mh), put_item(b)]))
    reply = await archive.stub.ContainsEnvelopes(
        pb.ContainsEnvelopesRequest(
            envelope_hashes=[b.hash, b"\x44" * 32, a.hash, b.hash], message_hashes=[mh, b"\x45" * 32, mh]
        )
    )
    assert list(reply.present_envelope_hashes) == [b.hash, a.hash]
    assert list(reply.present_message_hashes) == [mh]
    empty = await archive.stub.ContainsEnvelopes(pb.ContainsEnvelopesRequest())
    assert not empty.present_envelope_hashes and not empty.present_message_hashes


# ---------------------------------------------------------------------------------------------- maintenance


async def test_stats_counts_envelopes_bytes_span_and_partitions(archive: Running, backend: str) -> None:
    empty = await archive.stub.Stats(pb.StatsRequest(exact=True))
    assert (empty.backend, empty.envelope_count, empty.envelope_bytes) == (backend, 0, 0)
    assert not empty.HasField("sent_span") and not empty.HasField("default_retention")
    envs = [
        envelope(HOUR0 + i * 900, (A, B)[i % 2], i, size=100 + i) for i in range(12)
    ]  # three hour buckets
    await put(archive.stub, envs)
    stats = await archive.stub.Stats(pb.StatsRequest(exact=True))
    time_parts = await collect(
        lambda: archive.stub.ListBuckets(pb.ListBucketsRequest(table=pb.BUCKET_TABLE_TIME))
    )
    topic_parts = await collect(
        lambda: archive.stub.ListBuckets(pb.ListBucketsRequest(table=pb.BUCKET_TABLE_TOPIC))
    )
    assert stats.envelope_count == 12 and stats.exact
    assert stats.envelope_bytes == sum(len(e.raw) for e in envs)
    assert (stats.sent_span.lower, stats.sent_span.upper) == (HOUR0, HOUR0 + 11 * 900)
    assert stats.time_bucket_count == len(time_parts) >= 3
    assert stats.topic_bucket_count == len(topic_parts) >= 2
    if backend == "sqlite":
        assert (stats.time_bucket_count, stats.topic_bucket_count) == (3, 2)
    quick = await archive.stub.Stats(pb.StatsRequest())
    assert (quick.envelope_count, quick.envelope_bytes, quick.exact, quick.topic_bucket_count) == (
        12,
        stats.envelope_bytes,
        False,
        0,
    )


async def test_list_buckets_streams_partitions_with_their_sizes(archive: Running) -> None:
    envs = [envelope(HOUR0 + i * 1200, (A, B)[i % 2], i) for i in range(9)]  # hours 0, 1, 2
    await put(archive.stub, envs)
    every = await collect(lambda: archive.stub.ListBuckets(pb.ListBucketsRequest()))
    times = [b for b in every if b.key.table == pb.BUCKET_TABLE_TIME]
    topics = [b for b in every if b.key.table == pb.BUCKET_TABLE_TOPIC]
    assert sum(b.row_count for b in times) == sum(b.row_count for b in topics) == 9
    assert sum(b.byte_estimate for b in times) == sum(len(e.raw) for e in envs)
    assert {b.key.bucket_start for b in times} == {HOUR0, HOUR0 + HOUR, HOUR0 + 2 * HOUR}
    assert all(b.width.seconds == HOUR and b.key.topic == b"" for b in times)
    assert all(b.width.seconds == DAY and b.key.bucket_start % DAY == 0 for b in topics)
    only_a = await collect(lambda: archive.stub.ListBuckets(pb.ListBucketsRequest(topic=A)))
    assert {b.key.topic for b in only_a} == {A} and sum(b.row_count for b in only_a) == 5
    second = await collect(
        lambda: archive.stub.ListBuckets(
            pb.ListBucketsRequest(table=pb.BUCKET_TABLE_TIME, range=time_range(HOUR0 + 1, HOUR0 + HOUR))
        )
    )
    assert {b.key.bucket_start for b in second} == {HOUR0 + HOUR}
    assert await collect(lambda: archive.stub.ListBuckets(pb.ListBucketsRequest(min_bytes=10**9))) == []


async def test_delete_buckets_dry_run_reports_and_real_run_removes(archive: Running) -> None:
    first = [envelope(HOUR0 + i, A, i) for i in range(5)]
    later = [envelope(HOUR0 + HOUR + i, B, i) for i in range(3)]
    await put(archive.stub, first + later)
    parts = await collect(
        lambda: archive.stub.ListBuckets(
            pb.ListBucketsRequest(table=pb.BUCKET_TABLE_TIME, range=time_range(HOUR0, HOUR0))
        )
    )
    absent = pb.BucketKey(table=pb.BUCKET_TABLE_TIME, bucket_start=HOUR0 - 10 * DAY, shard=0)
    keys = [p.key for p in parts] + [absent]
    dry = await archive.stub.DeleteBuckets(pb.DeleteBucketsRequest(buckets=keys, dry_run=True))
    assert dry.dry_run and dry.missing == 1 and dry.rows_removed == 5
    assert dry.bytes_removed == sum(len(e.raw) for e in first)
    assert [d.key for d in dry.deleted] == keys and dry.deleted[-1].row_count == 0
    everything = [e.hash for e in first + later]
    still = await archive.stub.ContainsEnvelopes(pb.ContainsEnvelopesRequest(envelope_hashes=everything))
    assert list(still.present_envelope_hashes) == everything
    real = await archive.stub.DeleteBuckets(pb.DeleteBucketsRequest(buckets=keys))
    assert (real.dry_run, real.missing, real.rows_removed) == (False, 1, 5)
    after = await archive.stub.ContainsEnvelopes(pb.ContainsEnvelopesRequest(envelope_hashes=everything))
    assert list(after.present_envelope_hashes) == [e.hash for e in later]


async def test_expire_dry_run_then_real_run_with_a_topic_override(archive: Running) -> None:
    old_day = BASE - 3 * DAY
    old_a = [envelope(old_day + i, A, i) for i in range(5)]
    old_b = [envelope(old_day + 10 + i, B, i) for i in range(3)]
    recent = [envelope(BASE + i, C, i) for i in range(4)]
    await put(archive.stub, old_a + old_b + recent)
    everything = [e.hash for e in old_a + old_b + recent]
    now = Timestamp(seconds=BASE)

    dry = await archive.stub.Expire(pb.ExpireRequest(cutoff=BASE - DAY, now=now, dry_run=True))
    assert dry.dry_run and dry.rows_removed == 8
    assert dry.bytes_removed == sum(len(e.raw) for e in old_a + old_b)
    removed_times = {r.key.bucket_start for r in dry.removed if r.key.table == pb.BUCKET_TABLE_TIME}
    assert removed_times == {old_day - old_day % HOUR}
    assert {r.key.topic for r in dry.removed if r.key.table == pb.BUCKET_TABLE_TOPIC} == {A, B}
    assert not dry.kept
    present = await archive.stub.ContainsEnvelopes(pb.ContainsEnvelopesRequest(envelope_hashes=everything))
    assert list(present.present_envelope_hashes) == everything  # a dry run changes nothing

    keep_b = pb.TopicRetention(topic=B, retention=Duration(seconds=10 * DAY))
    dry_b = await archive.stub.Expire(
        pb.ExpireRequest(cutoff=BASE - DAY, topic_retention=[keep_b], now=now, dry_run=True)
    )
    assert dry_b.rows_removed == 5
    assert {k.key.bucket_start for k in dry_b.kept} == removed_times  # B's envelopes keep that bucket
    assert {r.key.topic for r in dry_b.removed if r.key.table == pb.BUCKET_TABLE_TOPIC} == {A}

    real = await archive.stub.Expire(pb.ExpireRequest(cutoff=BASE - DAY, now=now))
    assert not real.dry_run and real.rows_removed == 8
    left = await archive.stub.ContainsEnvelopes(pb.ContainsEnvelopesRequest(envelope_hashes=everything))
    assert list(left.present_envelope_hashes) == [e.hash for e in recent]
    assert (await archive.stub.Stats(pb.StatsRequest(exact=True))).envelope_count == 4


async def test_shard_plan_versions_and_invariants(archive: Running, backend: str) -> None:
    envs = [envelope(HOUR0 + i, (A, B)[i % 2], i) for i in range(6)]
    await put(archive.stub, envs)
    plan = (await archive.stub.GetShardPlan(pb.GetShardPlanRequest())).plan
    defaults = (4, 1) if backend == "cassandra" else (1, 1)
    assert (plan.version, plan.default_time_shards, plan.default_topic_shards) == (0, *defaults)
    assert (plan.time_bucket_width.seconds, plan.topic_bucket_width.seconds, len(plan.entries)) == (
        HOUR,
        DAY,
        0,
    )

    plan.entries.add(table=pb.BUCKET_TABLE_TIME, bucket_start=HOUR0, shards=8)
    plan.updated_by = "test"
    version = (await archive.stub.PutShardPlan(pb.PutShardPlanRequest(plan=plan, expected_version=0))).version
    assert version > 0
    current = (await archive.stub.GetShardPlan(pb.GetShardPlanRequest())).plan
    assert current.version == version
    assert [(e.table, e.bucket_start, e.shards) for e in current.entries] == [
        (pb.BUCKET_TABLE_TIME, HOUR0, 8)
    ]
    # Envelopes written before the change stay visible, and new writes land under the new plan.
    later = envelope(HOUR0 + 100, A, 100)
    await put(archive.stub, [later])
    reply = await archive.stub.QueryEnvelopes(pb.QueryEnvelopesRequest(range=time_range(), limit=100))
    assert [e.hash for e in reply.envelopes] == ordered([*envs, later])

    stale = await expect_status(
        grpc.StatusCode.FAILED_PRECONDITION, archive.stub.PutShardPlan(pb.PutShardPlanRequest(plan=plan))
    )
    assert stale.startswith(f"shard plan version conflict: expected_version 0, current version {version}")
    lower = pb.ShardPlan()
    lower.CopyFrom(current)
    lower.entries[0].shards = 2
    message = await expect_status(
        grpc.StatusCode.FAILED_PRECONDITION,
        archive.stub.PutShardPlan(pb.PutShardPlanRequest(plan=lower, expected_version=version)),
    )
    assert "lowering envelopes_by_time bucket" in message and "from 8 to 2 shards is refused" in message
    dropped = pb.ShardPlan()
    dropped.CopyFrom(current)
    del dropped.entries[:]
    message = await expect_status(
        grpc.StatusCode.FAILED_PRECONDITION,
        archive.stub.PutShardPlan(pb.PutShardPlanRequest(plan=dropped, expected_version=version)),
    )
    assert "is missing; existing entries cannot be removed" in message
    raised = pb.ShardPlan()
    raised.CopyFrom(current)
    raised.entries[0].shards = 16
    newer = (
        await archive.stub.PutShardPlan(pb.PutShardPlanRequest(plan=raised, expected_version=version))
    ).version
    assert newer > version
    elsewhere = await archive.stub.GetShardPlan(pb.GetShardPlanRequest(range=time_range(0, HOUR0 - 1)))
    assert (elsewhere.plan.version, len(elsewhere.plan.entries)) == (newer, 0)
