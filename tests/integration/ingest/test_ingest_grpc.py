"""Ingest over real gRPC in front of the real archive service (SQLite): happy path, duplicates, rejections."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from mailmesh.common.v1 import common_pb2
from mailmesh.ingest.v1 import ingest_pb2
from tests.integration.ingest.conftest import IngestFactory
from tests.integration.ingest.ingest_support import (
    TOPIC,
    ArchiveView,
    IngestHandle,
    batches_of,
    low_pow_envelope,
    make_envelopes,
    now_stamp,
    run_stream,
)
from wakucodec.keccak import keccak256
from wakucodec.wakumessage import DEFAULT_PUBSUB_TOPIC, message_from_v1, message_hash

pytestmark = pytest.mark.timeout(180)


async def test_5000_envelopes_streamed_are_archived_exactly_once(
    ingest: IngestHandle, make_ingest: IngestFactory, archive_view: ArchiveView
) -> None:
    envelopes = make_envelopes(5000)
    batches = batches_of(envelopes, 100)
    result = await run_stream(ingest.stub, batches)
    assert result.error is None, result.error
    assert sorted(result.acks) == [b.batch_id for b in batches]  # exactly one ack per batch
    for ack in result.acks.values():
        assert (ack.accepted, ack.duplicates, list(ack.rejections)) == (100, 0, [])
    hashes = [e.hash for e in envelopes]
    assert await archive_view.present(hashes) == set(hashes)
    assert await archive_view.count() == 5000  # and nothing else: each exactly once

    # Re-sent: duplicates, answered from ingest's seen cache (no new rows).
    again = await run_stream(ingest.stub, batches_of(envelopes[:1000], 250, first_id=100))
    assert again.error is None
    assert [(a.accepted, a.duplicates) for a in again.acks.values()] == [(0, 250)] * 4
    # A fresh ingest instance has an empty cache: the archive itself reports them as duplicates.
    fresh = await make_ingest()
    third = await run_stream(fresh.stub, batches_of(envelopes[-500:], 500, first_id=200))
    assert third.error is None
    assert [(a.accepted, a.duplicates) for a in third.acks.values()] == [(0, 500)]
    assert fresh.metric("waku_envelopes_cached_total", cache="miss") == 500
    assert await archive_view.count() == 5000
    assert ingest.metric("mailserver_envelopes_total") == 5000
    assert ingest.metric("waku_envelopes_cached_total", cache="hit") == 1000


async def test_the_message_hash_is_archived_with_each_envelope(
    ingest: IngestHandle, archive_view: ArchiveView
) -> None:
    (envelope,) = make_envelopes(1, data_size=64)
    reply = await ingest.stub.IngestOne(ingest_pb2.IngestOneRequest(envelope=envelope.raw), timeout=30)
    assert reply.outcome == ingest_pb2.INGEST_OUTCOME_ACCEPTED
    assert reply.hash == envelope.hash
    expected = message_hash(
        DEFAULT_PUBSUB_TOPIC, message_from_v1(envelope.topic, envelope.data, envelope.sent)
    )
    found = await archive_view.by_message_hash(expected)
    assert found.envelope.hash == envelope.hash
    assert found.envelope.rlp == envelope.raw
    assert found.message_hash == expected


async def test_a_mixed_batch_gets_the_right_rejections(
    make_ingest: IngestFactory, archive_view: ArchiveView
) -> None:
    other_topic = bytes.fromhex("0badc0de")
    ingest = await make_ingest(
        INGEST_MAX_MESSAGE_SIZE="2048",
        INGEST_TOPIC_ALLOWLIST=f"0x{TOPIC.hex()}",
        INGEST_SYNC_ALLOWANCE_SECONDS="10",
    )
    good = make_envelopes(3, data_size=100)
    now = good[0].sent
    batch = [
        good[0].raw,  # 0 accepted
        make_envelopes(1, sent=now + 3600, tag=1)[0].raw,  # 1 in the future
        make_envelopes(1, sent=now - 3600, ttl=60, tag=2)[0].raw,  # 2 very old
        make_envelopes(1, sent=now - 65, ttl=60, tag=3)[0].raw,  # 3 expired (5 s ago)
        make_envelopes(1, data_size=4096, tag=4)[0].raw,  # 4 oversized for 2048
        low_pow_envelope(0.000002).raw,  # 5 low PoW at the status-go node default
        make_envelopes(1, topic=other_topic, tag=5)[0].raw,  # 6 topic not on the allow-list
        b"\xde\xad\xbe\xef",  # 7 malformed
        good[0].raw,  # 8 repeated in the batch
        good[1].raw,  # 9 accepted
    ]
    request = ingest_pb2.IngestBatchRequest(
        batch=ingest_pb2.IngestBatch(batch_id=7, envelopes=batch, received_at=now_stamp(now))
    )
    ack = (await ingest.stub.IngestBatch(request, timeout=30)).ack
    assert ack.batch_id == 7
    assert (ack.accepted, ack.duplicates) == (2, 1)
    assert [(r.index, r.reason) for r in ack.rejections] == [
        (1, common_pb2.ENVELOPE_FAULT_IN_FUTURE),
        (2, common_pb2.ENVELOPE_FAULT_VERY_OLD),
        (3, common_pb2.ENVELOPE_FAULT_EXPIRED),
        (4, common_pb2.ENVELOPE_FAULT_OVERSIZED),
        (5, common_pb2.ENVELOPE_FAULT_LOW_POW),
        (6, common_pb2.ENVELOPE_FAULT_TOPIC_NOT_ALLOWED),
        (7, common_pb2.ENVELOPE_FAULT_MALFORMED),
    ]
    for rejection in ack.rejections:
        assert rejection.hash == keccak256(batch[rejection.index])
        assert rejection.detail
    assert ack.accepted + ack.duplicates + len(ack.rejections) == len(batch)
    assert await archive_view.present(keccak256(raw) for raw in batch) == {good[0].hash, good[1].hash}
    assert ingest.metric("waku_envelopes_rejected_total", reason="low_pow") == 1
    assert ingest.metric("waku_envelopes_cache_failures_total", type="very_old") == 1


async def test_a_bad_batch_on_a_stream_is_rejected_and_the_stream_goes_on(
    ingest: IngestHandle, archive_view: ArchiveView
) -> None:
    envelopes = make_envelopes(30)
    first, third = (
        batches_of(envelopes[:10], 10, first_id=1)[0],
        batches_of(envelopes[20:], 10, first_id=3)[0],
    )
    no_time = ingest_pb2.IngestBatch(
        batch_id=2, envelopes=[e.raw for e in envelopes[10:20]]
    )  # received_at unset
    garbage = ingest_pb2.IngestBatch(
        batch_id=4, envelopes=[b"", b"\xc0", b"\xff" * 3], received_at=now_stamp()
    )
    empty = ingest_pb2.IngestBatch(batch_id=5, received_at=now_stamp())
    result = await run_stream(ingest.stub, [first, no_time, third, garbage, empty])
    assert result.error is None
    assert result.acks[1].accepted == 10 and result.acks[3].accepted == 10
    assert [r.reason for r in result.acks[2].rejections] == [common_pb2.ENVELOPE_FAULT_MALFORMED] * 10
    assert "received_at" in result.acks[2].rejections[0].detail
    assert [r.index for r in result.acks[4].rejections] == [0, 1, 2]
    assert (result.acks[5].accepted, result.acks[5].duplicates, len(result.acks[5].rejections)) == (0, 0, 0)
    assert await archive_view.count() == 20


async def test_ingest_one_outcomes(ingest: IngestHandle) -> None:
    (envelope,) = make_envelopes(1)
    one = ingest_pb2.IngestOneRequest(envelope=envelope.raw, received_at=now_stamp())
    first = await ingest.stub.IngestOne(one, timeout=30)
    second = await ingest.stub.IngestOne(one, timeout=30)
    bad = await ingest.stub.IngestOne(ingest_pb2.IngestOneRequest(envelope=b"nope"), timeout=30)
    assert first.outcome == ingest_pb2.INGEST_OUTCOME_ACCEPTED
    assert second.outcome == ingest_pb2.INGEST_OUTCOME_DUPLICATE
    assert bad.outcome == ingest_pb2.INGEST_OUTCOME_REJECTED
    assert (bad.rejection.index, bad.rejection.reason) == (0, common_pb2.ENVELOPE_FAULT_MALFORMED)
    assert bad.hash == keccak256(b"nope")


async def test_ingest_batch_without_a_batch_is_invalid_argument(ingest: IngestHandle) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await ingest.stub.IngestBatch(ingest_pb2.IngestBatchRequest(), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_concurrent_streams_share_writes(make_ingest: IngestFactory, archive_view: ArchiveView) -> None:
    # Four edge peers relaying overlapping traffic: every envelope is written once, whoever sent it first.
    ingest = await make_ingest(INGEST_BATCH_MAX_DELAY_MS="50")
    envelopes = make_envelopes(800, data_size=256)
    streams = [
        run_stream(ingest.stub, batches_of(envelopes[(k * 200) % 800 :] + envelopes[: (k * 200) % 800], 50))
        for k in range(4)
    ]
    results = await asyncio.gather(*streams)
    accepted = duplicates = 0
    for result in results:
        assert result.error is None
        assert len(result.acks) == 16
        accepted += sum(a.accepted for a in result.acks.values())
        duplicates += sum(a.duplicates for a in result.acks.values())
    assert (accepted, duplicates) == (800, 3 * 800)
    assert await archive_view.count() == 800
    writes = ingest.registry.get_sample_value("ingest_archive_write_envelopes_count") or 0
    assert writes < 800 / 10  # coalesced: far fewer writes than envelopes
