"""WatchServed over real gRPC in front of a real archive: what Query delivered, chunk by chunk, resumable
after the last chunk a watcher applied (the subscription service marks those records stored)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc.aio

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from tests.integration.history.history_support import BASE, make_envelopes, put, query

TOPIC = bytes.fromhex("0a0b0c0d")


async def test_watchers_see_every_served_envelope_and_resume_after_their_last_chunk(
    history_stub: Any, archive_stub: Any
) -> None:
    corpus = make_envelopes([BASE + i for i in range(30)], TOPIC, tag=7)
    await put(archive_stub, corpus)
    watch = history_stub.WatchServed(history_pb2.WatchServedRequest())
    first = await asyncio.wait_for(watch.read(), 10)
    assert first.epoch and not first.resumed and not first.chunks  # live: nothing served yet
    page = await query(history_stub, lower=BASE, upper=BASE + 100, topics=[TOPIC], limit=20)
    served: list[tuple[int, bytes]] = []
    while sum(len(h) // 32 for _, h in served) < 20:
        reply = await asyncio.wait_for(watch.read(), 10)
        served += [(c.sequence, c.envelope_hashes) for c in reply.chunks]
    hashes = [h[i : i + 32] for _, h in served for i in range(0, len(h), 32)]
    assert hashes == [e.hash for e in corpus[:20]] and len(page.envelopes) == 20
    watch.cancel()

    await query(history_stub, lower=BASE + 20, upper=BASE + 100, topics=[TOPIC], limit=100)
    last = served[-1][0]
    again = history_stub.WatchServed(
        history_pb2.WatchServedRequest(resume_epoch=first.epoch, after_sequence=last)
    )
    head = await asyncio.wait_for(again.read(), 10)
    assert head.resumed and head.epoch == first.epoch
    rest = await asyncio.wait_for(again.read(), 10)
    assert [c.sequence for c in rest.chunks] == [last + 1]
    assert rest.chunks[0].envelope_hashes == b"".join(e.hash for e in corpus[20:])
    again.cancel()


async def test_a_watch_is_ended_when_history_query_stops(make_history: Any) -> None:
    handle = await make_history()
    async with grpc.aio.insecure_channel(handle.address) as channel:
        watch = history_pb2_grpc.HistoryQueryServiceStub(channel).WatchServed(
            history_pb2.WatchServedRequest()
        )
        await asyncio.wait_for(watch.read(), 10)
        stopping = asyncio.create_task(handle.stop())
        try:
            await asyncio.wait_for(watch.read(), 10)
        except grpc.aio.AioRpcError as err:
            assert err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        else:
            raise AssertionError("the watch went on after shutdown")
        await stopping
