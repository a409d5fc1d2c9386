"""Faults between ingest and the archive: down → UNAVAILABLE and nothing acknowledged; back → ingest resumes;
stopped mid-stream → every acknowledged envelope is archived; graceful drain.

Ordering is forced with events (the request stream is a generator that waits for the test); every wait is
bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

import grpc
import grpc.aio
import pytest

from mailmesh.ingest.v1 import ingest_pb2
from tests.integration.ingest.conftest import IngestFactory
from tests.integration.ingest.ingest_support import (
    WAIT,
    ArchiveHandle,
    ArchiveView,
    IngestHandle,
    assert_ended_unavailable,
    batches_of,
    make_envelopes,
    run_stream,
)
from wakucodec.envelope import Envelope
from wakucodec.keccak import keccak256

pytestmark = pytest.mark.timeout(180)

#: Longest ingest may take to report a stopped archive: connections are refused, so each write fails after
#: its gRPC retries (a fraction of a second); generous for a loaded machine.
UNAVAILABLE_BOUND_S = 15.0


def envelopes_of(batches: Sequence[ingest_pb2.IngestBatch]) -> list[bytes]:
    return [raw for b in batches for raw in b.envelopes]


async def test_archive_down_gives_unavailable_and_no_ack_then_ingest_resumes(
    archive: ArchiveHandle, ingest: IngestHandle, archive_view: ArchiveView
) -> None:
    warmup = make_envelopes(10, tag=1)
    assert (await run_stream(ingest.stub, batches_of(warmup, 10))).error is None  # the channel is connected
    await archive.stop()

    envelopes = make_envelopes(200, tag=2)
    batches = batches_of(envelopes, 50)
    started = time.monotonic()
    result = await asyncio.wait_for(run_stream(ingest.stub, batches), UNAVAILABLE_BOUND_S)
    assert time.monotonic() - started < UNAVAILABLE_BOUND_S
    assert_ended_unavailable(result.error, server=ingest, message="archive unavailable")
    assert result.acks == {}  # nothing acknowledged while the archive is down

    with pytest.raises(grpc.aio.AioRpcError) as info:
        await ingest.stub.IngestOne(
            ingest_pb2.IngestOneRequest(envelope=envelopes[0].raw), timeout=UNAVAILABLE_BOUND_S
        )
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert ingest.metric("ingest_archive_write_failures_total") >= 1

    await archive.start()  # same port, same file
    # The client re-sends its unacknowledged batches on a new stream; the same ingest resumes by itself.
    acks: dict[int, ingest_pb2.IngestAck] = {}
    deadline = time.monotonic() + WAIT
    while len(acks) < len(batches):
        retry = await run_stream(ingest.stub, [b for b in batches if b.batch_id not in acks])
        acks.update(retry.acks)
        if retry.error is not None:
            # Only UNAVAILABLE is acceptable while the channel reconnects (bounded by the reconnect back-off).
            assert_ended_unavailable(retry.error, server=ingest)
        assert time.monotonic() < deadline, "ingest did not resume"
    # An envelope of a batch whose ack was lost may have been written already: then it is a duplicate.
    assert sum(a.accepted + a.duplicates for a in acks.values()) == 200
    assert all(not a.rejections for a in acks.values())
    assert await archive_view.present(e.hash for e in envelopes) == {e.hash for e in envelopes}
    assert await archive_view.count() == 210


async def test_archive_stopped_mid_stream_loses_no_acknowledged_envelope(
    archive: ArchiveHandle, make_ingest: IngestFactory, archive_view: ArchiveView
) -> None:
    ingest = await make_ingest(INGEST_BATCH_MAX_ENVELOPES="100", INGEST_BATCH_MAX_DELAY_MS="5")
    envelopes = make_envelopes(4000, tag=3)
    batches = batches_of(envelopes, 100)
    acked: dict[int, ingest_pb2.IngestAck] = {}
    five_acked, archive_stopped = asyncio.Event(), asyncio.Event()

    async def requests() -> AsyncIterator[ingest_pb2.IngestBatch]:
        for n, batch in enumerate(batches):
            if n == 10:  # ten in flight, some acknowledged; the rest only once the archive is gone
                await archive_stopped.wait()
            yield batch

    async def consume() -> grpc.aio.AioRpcError | None:
        try:
            async for ack in ingest.stub.Ingest(requests(), timeout=120):
                acked[ack.batch_id] = ack
                if len(acked) >= 5:
                    five_acked.set()
        except grpc.aio.AioRpcError as err:
            return err
        return None

    stream = asyncio.ensure_future(consume())
    await asyncio.wait_for(five_acked.wait(), WAIT)
    await archive.stop()
    archive_stopped.set()
    error = await asyncio.wait_for(stream, UNAVAILABLE_BOUND_S + WAIT)
    assert_ended_unavailable(error, server=ingest, message="archive unavailable")
    assert 5 <= len(acked) < len(batches)

    await archive.start()
    acked_hashes = {keccak256(raw) for b in batches if b.batch_id in acked for raw in b.envelopes}
    assert await archive_view.present(acked_hashes) == acked_hashes  # acknowledged => durable

    # The client re-sends what was not acknowledged; afterwards everything is there exactly once.
    unacked = [b for b in batches if b.batch_id not in acked]
    deadline = time.monotonic() + WAIT
    while unacked:
        retry = await run_stream(ingest.stub, unacked)
        unacked = [b for b in unacked if b.batch_id not in retry.acks]
        assert time.monotonic() < deadline, "ingest did not resume"
    assert await archive_view.count() == len(envelopes)


async def test_graceful_drain_acks_what_it_read_then_ends_unavailable(
    ingest: IngestHandle, archive_view: ArchiveView
) -> None:
    envelopes: list[Envelope] = make_envelopes(300, tag=4)
    batches = batches_of(envelopes, 100)
    sent_all, never = asyncio.Event(), asyncio.Event()

    async def requests() -> AsyncIterator[ingest_pb2.IngestBatch]:
        for batch in batches:
            yield batch
        sent_all.set()
        await never.wait()  # the client keeps the stream open, as an edge peer does

    acks: dict[int, ingest_pb2.IngestAck] = {}
    all_acked = asyncio.Event()

    async def consume() -> grpc.aio.AioRpcError | None:
        try:
            async for ack in ingest.stub.Ingest(requests(), timeout=60):
                acks[ack.batch_id] = ack
                if len(acks) == len(batches):
                    all_acked.set()
        except grpc.aio.AioRpcError as err:
            return err
        return None

    stream = asyncio.ensure_future(consume())
    await asyncio.wait_for(asyncio.gather(sent_all.wait(), all_acked.wait()), WAIT)
    await asyncio.wait_for(ingest.mesh.stop(5), WAIT)
    error = await asyncio.wait_for(stream, WAIT)
    never.set()
    assert_ended_unavailable(error, server=ingest, message="shutting down")
    assert await archive_view.present(e.hash for e in envelopes) == {e.hash for e in envelopes}
