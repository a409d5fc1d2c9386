"""Listing (skip/take edges), refusals by the edge peer, ephemeral messages, cancel in flight and watch
resume, over real gRPC against a real edge peer and mesh."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2
from msgstore.types import Message, OutboxEntry, SendPriority, SendProgress, SendState
from services.send.config import Config
from services.send.ports import Publisher, PublishOutcome
from services.send.server import build, connect
from tests.integration.edge_peer.edge_peer_support import start_edge, stop_edge, wait_until
from tests.integration.send.send_support import TOPIC, Mesh, S, SendHandle, Watch, start_send

OTHER_TOPIC = "/app/1/other/proto"


async def _list(send: SendHandle, **kw: object) -> list[str]:
    request = send_pb2.ListSendStatusesRequest(**kw)  # type: ignore[arg-type]
    return [
        s.request_id
        async for chunk in send.stub.ListSendStatuses(request, timeout=10)
        for s in chunk.statuses
    ]


async def test_listing_filters_and_every_skip_take_edge(mesh: Mesh, tmp_path: Path) -> None:
    send = await start_send(mesh, tmp_path / "msg.db", SEND_BACKOFF_SECONDS="60")
    try:
        ids = []
        for i in range(5):
            topic = OTHER_TOPIC if i == 4 else TOPIC
            reply = await send.send(message=common_pb2.WakuMessage(payload=b"%d" % i, content_topic=topic))
            ids.append(reply.request_id)
        assert await _list(send) == ids  # both omitted: every request, by scheduling time
        assert await _list(send, skip=2) == ids[2:]
        assert await _list(send, take=2) == ids[:2]
        assert await _list(send, skip=1, take=2) == ids[1:3]
        assert await _list(send, take=0) == []
        assert await _list(send, skip=5) == [] and await _list(send, skip=50) == []
        assert await _list(send, skip=4, take=10) == ids[4:]
        assert await _list(send, content_topic=OTHER_TOPIC) == [ids[4]]
        assert await _list(send, request_ids=[ids[3], ids[0]]) == [ids[0], ids[3]]
        assert await _list(send, content_topic=TOPIC, skip=1, take=1) == [ids[1]]
        assert await _list(send, states=[S.SEND_STATE_SUCCEEDED]) == []
    finally:
        await send.stop()


async def test_a_refused_envelope_fails_at_once_with_the_fault(mesh: Mesh, tmp_path: Path) -> None:
    home = tmp_path / "strict-edge"
    home.mkdir()
    strict = await start_edge(
        home, f"127.0.0.1:{mesh.ingest.mesh.port}", mesh.history.address, EDGE_MIN_POW="50"
    )
    send = await start_send(
        mesh, tmp_path / "msg.db", SEND_EDGE_ADDR=f"127.0.0.1:{strict.mesh.port}", SEND_MAX_POW="0"
    )
    watch = Watch(send)
    try:
        reply = await send.send()
        failed = await watch.until(reply.request_id, S.SEND_STATE_FAILED)
        assert failed.progress.attempts == 1 and not failed.sent
        assert failed.error.kind == common_pb2.MESSAGE_ERROR_KIND_REJECTED
        assert failed.error.envelope_fault == common_pb2.ENVELOPE_FAULT_LOW_POW
    finally:
        await watch.close()
        await send.stop()
        await stop_edge(strict)


async def test_ephemeral_messages_are_relayed_never_archived_nor_store_confirmed(
    mesh: Mesh, tmp_path: Path
) -> None:
    _, sink = await mesh.peer()
    send = await start_send(
        mesh, tmp_path / "msg.db", MSGAPI_STORE_CONFIRMATION="true", MSGAPI_CONFIRM_CONTENT_TOPICS=TOPIC
    )
    watch = Watch(send)
    try:
        eph = await send.send(
            message=common_pb2.WakuMessage(payload=b"e", content_topic=TOPIC, ephemeral=True)
        )
        done = await watch.until(eph.request_id, S.SEND_STATE_SUCCEEDED)
        assert watch.states(eph.request_id) == [
            S.SEND_STATE_QUEUED,
            S.SEND_STATE_SENDING,
            S.SEND_STATE_SUCCEEDED,
        ]
        assert done.sent and not done.stored and not done.progress.store_confirmation
        durable = await send.send(message=common_pb2.WakuMessage(payload=b"d", content_topic=TOPIC))
        stored = await watch.until(durable.request_id, S.SEND_STATE_SUCCEEDED)
        assert stored.stored and stored.progress.store_confirmation  # a monitored topic: confirmed
        assert {e.hash for e in await sink.wait_for(2)} == {done.envelope_hash, stored.envelope_hash}
        # Ingest keeps order: the archive holding the later envelope means the earlier never went there.
        assert not await send.deps.engine._checker.holds(_entry_of(done))
    finally:
        await watch.close()
        await send.stop()


class _GatedPublisher:
    """The real edge-peer publisher behind a gate the test opens: holds an attempt in flight."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def publish(self, raw: bytes, envelope_hash: bytes, *, ephemeral: bool) -> PublishOutcome:
        self.entered.set()
        await self.gate.wait()
        return await self.inner.publish(raw, envelope_hash, ephemeral=ephemeral)

    async def pow_target(self) -> float:
        return await self.inner.pow_target()


async def test_cancel_in_flight_keeps_the_attempt_but_starts_no_other(mesh: Mesh, tmp_path: Path) -> None:
    send = await start_send(mesh, tmp_path / "msg.db")
    engine = send.deps.engine
    gated = _GatedPublisher(engine._publisher)
    engine._publisher = gated
    watch = Watch(send)
    try:
        reply = await send.send()
        await asyncio.wait_for(gated.entered.wait(), 10)  # the attempt is publishing now
        out = await send.stub.Cancel(send_pb2.CancelRequest(request_id=reply.request_id), timeout=10)
        assert out.canceled and out.state == S.SEND_STATE_CANCELED
        gated.gate.set()  # the publish completes (NO_PEERS): its result must be discarded
        await wait_until(lambda: reply.request_id not in engine._busy, what="the attempt ended")
        status = await send.status(reply.request_id)
        assert status.progress.state == S.SEND_STATE_CANCELED and not status.sending
        assert status.progress.attempts == 1
        await watch.until(reply.request_id, S.SEND_STATE_CANCELED)
        assert watch.states(reply.request_id) == [
            S.SEND_STATE_QUEUED,
            S.SEND_STATE_SENDING,
            S.SEND_STATE_CANCELED,
        ]
    finally:
        await watch.close()
        await send.stop()


async def test_watch_resumes_exactly_after_a_position_and_live_watch_starts_now(
    mesh: Mesh, tmp_path: Path
) -> None:
    _, _sink = await mesh.peer()
    send = await start_send(mesh, tmp_path / "msg.db")
    full = Watch(send)
    try:
        first = await send.send()
        await full.until(first.request_id, S.SEND_STATE_SUCCEEDED)
        live = Watch(send, after=None)
        second = await send.send(message=common_pb2.WakuMessage(payload=b"2", content_topic=TOPIC))
        await full.until(second.request_id, S.SEND_STATE_SUCCEEDED)
        await live.until(second.request_id, S.SEND_STATE_SUCCEEDED)
        assert {c.request_id for c in live.changes} == {second.request_id}
        await live.close()
        # Resume from the position after the first request's second change: the rest, nothing twice.
        replies = [r async for r in _replies(send, b"", 6)]
        resumed = Watch(send, after=replies[1].position)
        await resumed.until(second.request_id, S.SEND_STATE_SUCCEEDED)
        expected = [(c.request_id, c.sequence) for c in full.changes[2:]]
        assert [(c.request_id, c.sequence) for c in resumed.changes] == expected
        await resumed.close()
    finally:
        await full.close()
        await send.stop()


async def _replies(
    send: SendHandle, after: bytes, count: int
) -> AsyncIterator[send_pb2.WatchSendStatusesResponse]:
    call = send.stub.WatchSendStatuses(send_pb2.WatchSendStatusesRequest(after_position=after))
    n = 0
    async for reply in call:
        yield reply
        n += 1
        if n == count:
            call.cancel()
            return


def _entry_of(status: send_pb2.SendStatus) -> OutboxEntry:
    """Just enough of an outbox entry for the archive check (it reads the envelope hash)."""
    progress = SendProgress(SendState.SUCCEEDED, SendPriority.NORMAL, 1, 4, 1, False, 0.0)
    message = Message(payload=b"", content_topic=status.message.content_topic)
    return OutboxEntry(
        status.request_id,
        status.message_hash,
        status.pubsub_topic,
        message,
        progress,
        envelope_hash=status.envelope_hash,
    )


async def test_shutdown_ends_open_watches_with_unavailable(mesh: Mesh, tmp_path: Path) -> None:
    send = await start_send(mesh, tmp_path / "msg.db")
    call = send.stub.WatchSendStatuses(send_pb2.WatchSendStatusesRequest(after_position=b""))
    reply = await send.send()
    first = await anext(aiter(call))  # the stream is open and delivering
    assert first.status.request_id == reply.request_id
    stopping = asyncio.create_task(send.mesh.stop(grace=30.0))
    try:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in call:
                pass
        assert err.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "shutting down; resume from the last position" in (err.value.details() or "")
    finally:
        await stopping
        await send.channel.close()


async def test_a_watch_that_arrives_before_the_store_is_open_waits_for_it(mesh: Mesh, tmp_path: Path) -> None:
    """The server accepts calls while its start hook runs (NOT_SERVING); a follower that reconnects at once
    (the subscription service) must get its changes, not an INTERNAL from the unopened store."""
    cfg = Config.from_env(mesh.send_env(tmp_path / "msg.db"))
    registry = CollectorRegistry()
    deps = connect(cfg, registry=registry)
    gate = asyncio.Event()

    async def held() -> None:
        await gate.wait()

    deps = dataclasses.replace(deps, starters=(held, *deps.starters))  # the start hook waits for the gate
    server = build(cfg, deps)
    starting = asyncio.create_task(server.start())
    send = SendHandle(cfg, deps, server, registry, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}"))
    try:
        call = send.stub.WatchSendStatuses(send_pb2.WatchSendStatusesRequest(after_position=b""))
        health = health_pb2_grpc.HealthStub(send.channel)
        check = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING  # the watch is in, the store not
        gate.set()
        await starting
        reply = await send.send()
        first = await anext(aiter(call))
        assert first.status.request_id == reply.request_id
        call.cancel()
    finally:
        gate.set()
        await send.stop()


async def test_calls_that_arrive_before_the_store_is_open_wait_for_it(mesh: Mesh, tmp_path: Path) -> None:
    """Send, GetSendStatus, ListPendingRequests and Cancel during the start hook: answered once the store is
    open, never INTERNAL from the unopened store."""
    cfg = Config.from_env(mesh.send_env(tmp_path / "msg.db"))
    registry = CollectorRegistry()
    deps = connect(cfg, registry=registry)
    gate = asyncio.Event()

    async def held() -> None:
        await gate.wait()

    deps = dataclasses.replace(deps, starters=(held, *deps.starters))  # the start hook waits for the gate
    server = build(cfg, deps)
    starting = asyncio.create_task(server.start())
    send = SendHandle(cfg, deps, server, registry, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}"))

    async def pending() -> send_pb2.ListPendingRequestsResponse:
        return await send.stub.ListPendingRequests(send_pb2.ListPendingRequestsRequest(), timeout=10)

    async def cancel() -> send_pb2.CancelResponse:
        return await send.stub.Cancel(send_pb2.CancelRequest(request_id=str(uuid.uuid4())), timeout=10)

    try:
        early_send = asyncio.create_task(send.send())
        early_pending = asyncio.create_task(pending())
        early_cancel = asyncio.create_task(cancel())
        health = health_pb2_grpc.HealthStub(send.channel)
        check = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert not early_send.done() and not early_pending.done() and not early_cancel.done()
        gate.set()
        await starting
        reply = await early_send
        assert reply.request_id and reply.created
        await early_pending  # answered (its content depends on how far the engine got)
        assert (await early_cancel).canceled is False  # an unknown id is ignored, as the spec says
        assert (await send.status(reply.request_id)).request_id == reply.request_id
    finally:
        gate.set()
        await send.stop()
