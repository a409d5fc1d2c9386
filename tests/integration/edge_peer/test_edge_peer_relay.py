"""Envelopes from a real waku peer over loopback RLPx reach ingest and StreamEnvelopes; Publish relays."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from mailmesh.common.v1 import common_pb2
from mailmesh.edgepeer.v1 import edgepeer_pb2
from tests.integration.edge_peer.edge_peer_support import (
    Edge,
    FakeIngest,
    envelopes,
    relay_client,
    request_client,
    wait_until,
)
from wakucodec.bloom import topic_to_bloom
from wakucodec.envelope import make_envelope
from wakucodec.keccak import keccak256
from wakunode.memory import MemorySink

TOPIC_A = b"\xaa\x00\x00\x01"
TOPIC_B = b"\xbb\x00\x00\x02"


async def _collect(stream: Any, count: int, into: list[edgepeer_pb2.StreamEnvelopesResponse]) -> None:
    total = 0
    async for response in stream:
        into.append(response)
        total += len(response.envelopes)
        if total >= count:
            return


async def test_posted_envelopes_reach_ingest_and_subscribers(
    edge: Edge, ingest: tuple[FakeIngest, str]
) -> None:
    fake, _ = ingest
    everything: list[edgepeer_pb2.StreamEnvelopesResponse] = []
    only_b: list[edgepeer_pb2.StreamEnvelopesResponse] = []
    by_bloom: list[edgepeer_pb2.StreamEnvelopesResponse] = []
    all_stream = edge.stub.StreamEnvelopes(edgepeer_pb2.StreamEnvelopesRequest())
    b_stream = edge.stub.StreamEnvelopes(edgepeer_pb2.StreamEnvelopesRequest(topics=[TOPIC_B]))
    bloom_stream = edge.stub.StreamEnvelopes(
        edgepeer_pb2.StreamEnvelopesRequest(bloom=topic_to_bloom(TOPIC_A))
    )
    first = [await anext(aiter(s)) for s in (all_stream, b_stream, bloom_stream)]
    assert all(f.epoch == edge.edge.feed.epoch and not f.resumed for f in first)
    batch = envelopes(6, topic=TOPIC_A) + envelopes(4, topic=TOPIC_B, first=100)
    async with request_client() as client:
        info = await client.connect(edge.enode)
        await client.post(info.pubkey, batch)
        tasks = [
            asyncio.create_task(_collect(all_stream, 10, everything)),
            asyncio.create_task(_collect(b_stream, 4, only_b)),
            asyncio.create_task(_collect(bloom_stream, 6, by_bloom)),
        ]
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        await wait_until(lambda: len(fake.hashes) == 10, what="10 envelopes at ingest")
        client_id = keccak256(client.server.pubkey)
    for call in (all_stream, b_stream, bloom_stream):
        call.cancel()
    assert sorted(fake.hashes) == sorted(e.hash for e in batch)
    sent = fake.batches[0]
    assert sent.source_peer_id == client_id and sent.source == "edge-test"
    assert abs(sent.received_at.seconds - time.time()) < 30
    received = [e for r in everything for e in r.envelopes]
    assert [e.sequence for e in received] == list(range(1, 11))
    assert {e.envelope.hash for e in received} == {e.hash for e in batch}
    assert all(e.source_peer_id == client_id and not e.local for e in received)
    assert received[0].envelope.rlp == next(b.raw for b in batch if b.hash == received[0].envelope.hash)
    assert {e.envelope.topic for r in only_b for e in r.envelopes} == {TOPIC_B}
    assert {e.envelope.topic for r in by_bloom for e in r.envelopes} == {TOPIC_A}
    assert edge.metric("waku_envelopes_received_total") == 10
    acked = {"outcome": "accepted"}
    await wait_until(lambda: edge.metric("edge_ingest_envelopes_acked_total", acked) == 10, what="acks")


async def test_publish_relays_and_ephemeral_stays_out_of_ingest(
    edge: Edge, ingest: tuple[FakeIngest, str]
) -> None:
    fake, _ = ingest
    sink = MemorySink()
    local = edge.stub.StreamEnvelopes(edgepeer_pb2.StreamEnvelopesRequest(include_local=True))
    await anext(aiter(local))
    async with relay_client(sink) as client:
        await client.connect(edge.enode)
        kept, fleeting = envelopes(3, topic=TOPIC_A), envelopes(2, topic=TOPIC_B, first=50)
        reply = await edge.stub.Publish(
            edgepeer_pb2.PublishRequest(envelopes=[e.raw for e in kept], relay_timeout=Duration(seconds=5))
        )
        assert [r.status for r in reply.results] == [edgepeer_pb2.PUBLISH_STATUS_PUBLISHED] * 3
        assert [r.relayed_to for r in reply.results] == [1, 1, 1]
        assert [r.hash for r in reply.results] == [e.hash for e in kept]
        eph = await edge.stub.Publish(
            edgepeer_pb2.PublishRequest(envelopes=[e.raw for e in fleeting], ephemeral=True)
        )
        assert {r.status for r in eph.results} == {edgepeer_pb2.PUBLISH_STATUS_PUBLISHED}
        await sink.wait_for(5, timeout=5)
        again = await edge.stub.Publish(edgepeer_pb2.PublishRequest(envelopes=[kept[0].raw]))
        assert again.results[0].status == edgepeer_pb2.PUBLISH_STATUS_ALREADY_KNOWN
    feed: list[edgepeer_pb2.StreamEnvelopesResponse] = []
    await asyncio.wait_for(_collect(local, 5, feed), 5)
    local.cancel()
    items = [e for r in feed for e in r.envelopes]
    assert all(e.local and not e.source_peer_id for e in items)
    assert [e.ephemeral for e in items] == [False] * 3 + [True] * 2
    await wait_until(lambda: len(fake.hashes) == 3, what="published envelopes at ingest")
    assert sorted(fake.hashes) == sorted(e.hash for e in kept)
    assert fake.batches[0].source_peer_id == b""


async def test_publish_reports_rejections_and_refuses_bad_requests(edge: Edge) -> None:
    now = int(time.time())
    expired = make_envelope(expiry=now - 3600, ttl=60, topic=TOPIC_A, data=b"old")
    reply = await edge.stub.Publish(
        edgepeer_pb2.PublishRequest(envelopes=[expired.raw, b"\xc0garbage"], relay_timeout=Duration(nanos=1))
    )
    assert [r.status for r in reply.results] == [edgepeer_pb2.PUBLISH_STATUS_REJECTED] * 2
    assert reply.results[0].fault == common_pb2.ENVELOPE_FAULT_VERY_OLD
    assert reply.results[1].fault == common_pb2.ENVELOPE_FAULT_MALFORMED and reply.results[1].error
    no_peer = await edge.stub.Publish(
        edgepeer_pb2.PublishRequest(envelopes=[envelopes(1)[0].raw], relay_timeout=Duration(nanos=50_000_000))
    )
    assert no_peer.results[0].status == edgepeer_pb2.PUBLISH_STATUS_NO_PEERS
    for bad in (
        edgepeer_pb2.PublishRequest(),
        edgepeer_pb2.PublishRequest(envelopes=[b"x"] * 1001),
        edgepeer_pb2.PublishRequest(envelopes=[b"x"], relay_timeout=Duration(seconds=31)),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await edge.stub.Publish(bad)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in edge.stub.StreamEnvelopes(edgepeer_pb2.StreamEnvelopesRequest(topics=[b"abc"])):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_stream_resumes_after_a_disconnect(edge: Edge) -> None:
    first_call = edge.stub.StreamEnvelopes(edgepeer_pb2.StreamEnvelopesRequest(include_local=True))
    head = await anext(aiter(first_call))
    await edge.stub.Publish(
        edgepeer_pb2.PublishRequest(envelopes=[e.raw for e in envelopes(5)], relay_timeout=Duration(nanos=1))
    )
    got: list[edgepeer_pb2.StreamEnvelopesResponse] = []
    await asyncio.wait_for(_collect(first_call, 2, got), 5)
    first_call.cancel()
    last = [e for r in got for e in r.envelopes][-1].sequence
    resumed = edge.stub.StreamEnvelopes(
        edgepeer_pb2.StreamEnvelopesRequest(
            include_local=True, resume_epoch=head.epoch, after_sequence=last, max_batch=2
        )
    )
    rest: list[edgepeer_pb2.StreamEnvelopesResponse] = []
    await asyncio.wait_for(_collect(resumed, 5 - last, rest), 5)
    resumed.cancel()
    assert rest[0].resumed and rest[0].epoch == head.epoch
    assert [e.sequence for r in rest for e in r.envelopes] == list(range(last + 1, 6))
    assert max(len(r.envelopes) for r in rest) <= 2
