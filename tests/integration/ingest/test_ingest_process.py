"""``python -m services.ingest`` as a real process: SIGKILL mid-stream loses no acknowledged envelope, a
restarted process takes the re-sent rest, and SIGTERM drains an open stream and exits 0.

The archive runs in-process (the real service over SQLite); ingest is a child process.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Sequence

import grpc
import grpc.aio
import pytest

from mailmesh.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from meshharness import Allow, ServiceProcess
from tests.integration.ingest.ingest_support import (
    WAIT,
    ArchiveHandle,
    ArchiveView,
    assert_ended_unavailable,
    batches_of,
    make_envelopes,
    run_stream,
    spawn_ingest,
)
from wakucodec.keccak import keccak256

pytestmark = pytest.mark.timeout(240)


async def stream_until(
    address: str,
    batches: Sequence[ingest_pb2.IngestBatch],
    *,
    hold_after: int,
    acked_enough: int,
    act: asyncio.Event,
    enough: asyncio.Event,
) -> tuple[set[int], grpc.aio.AioRpcError | None]:
    """Stream ``batches``, pausing after ``hold_after`` until ``act``; ``enough`` set at ``acked_enough``."""
    acked: set[int] = set()

    async def requests() -> AsyncIterator[ingest_pb2.IngestBatch]:
        for n, batch in enumerate(batches):
            if n == hold_after:
                await act.wait()
            yield batch

    async with grpc.aio.insecure_channel(address) as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        try:
            async for ack in stub.Ingest(requests(), timeout=120):
                acked.add(ack.batch_id)
                if len(acked) >= acked_enough:
                    enough.set()
        except grpc.aio.AioRpcError as err:
            return acked, err
    return acked, None


async def test_sigkill_mid_stream_then_restart(archive: ArchiveHandle, archive_view: ArchiveView) -> None:
    first: ServiceProcess = await spawn_ingest(archive.address, INGEST_BATCH_MAX_DELAY_MS="5")
    envelopes = make_envelopes(6000, tag=9)
    batches = batches_of(envelopes, 100)
    killed, enough = asyncio.Event(), asyncio.Event()
    stream = asyncio.ensure_future(
        stream_until(first.address, batches, hold_after=20, acked_enough=5, act=killed, enough=enough)
    )
    await asyncio.wait_for(enough.wait(), WAIT)  # some acknowledged, up to 20 read, writes in flight
    first.send_signal(signal.SIGKILL)
    assert await first.wait_exit_async(WAIT) == -signal.SIGKILL
    killed.set()
    acked, error = await asyncio.wait_for(stream, WAIT)
    assert_ended_unavailable(error)  # the connection died with the process
    assert 5 <= len(acked) <= 20

    # Acknowledged => durable: every envelope of every acknowledged batch survived the SIGKILL.
    acked_hashes = {keccak256(raw) for b in batches if b.batch_id in acked for raw in b.envelopes}
    assert await archive_view.present(acked_hashes) == acked_hashes

    second = await spawn_ingest(archive.address)
    try:
        unacked = [b for b in batches if b.batch_id not in acked]
        async with grpc.aio.insecure_channel(second.address) as channel:
            retry = await run_stream(ingest_pb2_grpc.IngestServiceStub(channel), unacked)
        assert retry.error is None, retry.error
        assert sorted(retry.acks) == [b.batch_id for b in unacked]
        assert await archive_view.count() == len(envelopes)  # the rest arrived, nothing twice
    finally:
        second.send_signal(signal.SIGTERM)
        assert await second.wait_exit_async(WAIT) == 0  # graceful: SIGTERM exits 0


async def test_sigterm_drains_an_open_stream_and_exits_cleanly(
    archive: ArchiveHandle, archive_view: ArchiveView
) -> None:
    proc = await spawn_ingest(archive.address)
    envelopes = make_envelopes(500, tag=10)
    batches = batches_of(envelopes, 100)
    terminated, enough = asyncio.Event(), asyncio.Event()
    # All five batches are sent; the client then keeps the stream open until the server ends it.
    stream = asyncio.ensure_future(
        stream_until(
            proc.address,
            [*batches, *batches_of(make_envelopes(1, tag=11), 1, first_id=99)],
            hold_after=len(batches),
            acked_enough=len(batches),
            act=terminated,
            enough=enough,
        )
    )
    await asyncio.wait_for(enough.wait(), WAIT)
    proc.send_signal(signal.SIGTERM)
    acked, error = await asyncio.wait_for(stream, WAIT)
    terminated.set()
    assert await proc.wait_exit_async(WAIT) == 0
    assert error is not None and error.code() == grpc.StatusCode.UNAVAILABLE  # the client was not writing
    assert "shutting down" in (error.details() or "")
    assert acked == {b.batch_id for b in batches}
    assert await archive_view.present(e.hash for e in envelopes) == {e.hash for e in envelopes}
    assert "stopped" in proc.logs.messages()
    # The open stream ended UNAVAILABLE on purpose (logged at WARNING, as every UNAVAILABLE is); nothing else.
    ended = Allow(r"/Ingest failed: ingest is shutting down", logger="meshcore.interceptors")
    assert [line.msg for line in proc.logs.unexpected() if not ended.matches(line)] == []
    assert len(proc.logs.unexpected()) == 1
