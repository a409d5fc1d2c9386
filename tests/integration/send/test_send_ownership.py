"""Pending sends survive a restart, and two replicas on one store behave as one (outbox shard leases)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import grpc

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2
from msgstore.sharding import shard_of
from tests.integration.send.send_support import TOPIC, Mesh, S, SendHandle, Watch, start_send


async def test_a_restart_on_the_same_store_resumes_pending_requests(mesh: Mesh, tmp_path: Path) -> None:
    db = tmp_path / "msg.db"
    first = await start_send(mesh, db, SEND_BACKOFF_SECONDS="2")
    watch = Watch(first)
    reply = await first.send()
    waiting = await watch.until(reply.request_id, S.SEND_STATE_RETRY_WAIT)
    await watch.close()
    await first.stop()
    _, sink = await mesh.peer()
    second = await start_send(mesh, db, SEND_BACKOFF_SECONDS="2")
    watch = Watch(second, after=b"")  # the whole retained log, across the restart
    try:
        done = await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED)
        assert done.progress.attempts == 2  # the attempt count came from the store
        began = done.progress.last_attempt_at.seconds + done.progress.last_attempt_at.nanos / 1e9
        due = waiting.progress.next_attempt_at.seconds + waiting.progress.next_attempt_at.nanos / 1e9
        assert began >= due  # the schedule continued; the restart did not retry early
        assert [e.hash for e in await sink.wait_for(1)] == [done.envelope_hash]
        sequences = [c.sequence for c in watch.of(reply.request_id)]
        assert sequences == sorted(set(sequences))  # the new owner continued the shard's numbering
    finally:
        await watch.close()
        await second.stop()


async def test_two_replicas_send_each_request_once_and_a_dead_ones_shards_are_taken_over(
    mesh: Mesh, tmp_path: Path
) -> None:
    await two_replicas_then_takeover(mesh, tmp_path / "msg.db")


async def two_replicas_then_takeover(mesh: Mesh, db: Path, **env: str) -> None:
    """Two replicas on one store share the shards; each request is sent once whichever replica accepted it;
    one dies holding its leases and the other takes its shards over within the lease TTL."""
    a = await start_send(mesh, db, **env)
    b = await start_send(mesh, db, **env)
    await shares([a, b], [2, 2])
    _, sink = await mesh.peer()
    watch = Watch(a)
    try:
        replies = [await (a if i % 2 else b).send(message=_message(i)) for i in range(6)]
        for reply in replies:  # every replica reads every request
            assert (await b.status(reply.request_id)).request_id == reply.request_id
        for reply in replies:
            await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED)
        received = await sink.wait_for(6)
        assert len(received) == 6 and len({e.hash for e in received}) == 6  # each request sent once
        await watch.close()
        orphaned = a.deps.engine.ownership.held
        await a.stop(release=False)  # dies holding its leases and its membership
        late = await b.send(message=_message(99), request_id=request_id_in(orphaned, 4))
        watch = Watch(b, after=watch.position)
        done = await watch.until(late.request_id, S.SEND_STATE_SUCCEEDED)
        await shares([b], [4])
        assert [c.progress.state for c in watch.changes if c.request_id != late.request_id] == []
        assert done.sent and (await sink.wait_for(7))[-1].hash == done.envelope_hash
    finally:
        await watch.close()
        await b.stop()


async def test_replicas_joining_and_dying_keep_fair_shares(mesh: Mesh, tmp_path: Path) -> None:
    db = tmp_path / "msg.db"
    six = {"MSGSTORE_OUTBOX_SHARDS": "6"}
    a = await start_send(mesh, db, **six)
    await shares([a], [6])
    b = await start_send(mesh, db, **six)
    await shares([a, b], [3, 3])  # the first hands half over to the newcomer
    c = await start_send(mesh, db, **six)
    running = [c, b, a]
    try:
        await shares([a, b, c], [2, 2, 2])
        _, sink = await mesh.peer()
        replies = [await (a, b, c)[i % 3].send(message=_message(i)) for i in range(9)]
        watch = Watch(a)
        for reply in replies:
            await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED)
        await watch.close()
        assert len({e.hash for e in await sink.wait_for(9)}) == 9
        running.remove(c)
        await c.stop(release=False)  # dies: the survivors take its two shards over within the lease TTL
        await shares([a, b], [3, 3])
    finally:
        for handle in running:
            await handle.stop()


async def shares(handles: list[SendHandle], expected: list[int], timeout: float = 30.0) -> None:
    """Wait until the replicas hold ``expected`` shard counts (in order), disjoint and covering them all."""
    async with asyncio.timeout(timeout):
        while True:
            held = [set(h.deps.engine.ownership.held) for h in handles]
            union = set().union(*held)
            if [len(h) for h in held] == expected and len(union) == sum(expected):
                return
            await asyncio.sleep(0.05)


def request_id_in(shards: tuple[int, ...], count: int) -> str:
    """A request id whose outbox shard (of ``count``) is one of ``shards``."""
    while shard_of(rid := str(uuid.uuid4()), count) not in shards:
        pass
    return rid


def _message(i: int) -> common_pb2.WakuMessage:
    return common_pb2.WakuMessage(payload=f"m{i}".encode(), content_topic=TOPIC)


async def test_cancel_through_a_non_owner_is_forwarded_to_the_owner(mesh: Mesh, tmp_path: Path) -> None:
    db = tmp_path / "msg.db"
    owner = await start_send(mesh, db, SEND_BACKOFF_SECONDS="60")
    other = await start_send(mesh, db, SEND_BACKOFF_SECONDS="60")
    await shares([owner, other], [2, 2])
    watch = Watch(owner)
    try:
        # Any replica accepts; the owner sends (no peer: it waits to retry).
        mine = owner.deps.engine.ownership.held
        reply = await other.send(request_id=request_id_in(mine, 4))
        await watch.until(reply.request_id, S.SEND_STATE_RETRY_WAIT)
        out = await other.stub.Cancel(send_pb2.CancelRequest(request_id=reply.request_id), timeout=10)
        assert out.canceled and out.state == S.SEND_STATE_CANCELED  # the owner's answer
        done = await watch.until(reply.request_id, S.SEND_STATE_CANCELED)  # saved by the owner
        assert not done.sending
        again = await other.stub.Cancel(send_pb2.CancelRequest(request_id=reply.request_id), timeout=10)
        assert not again.canceled and again.state == S.SEND_STATE_CANCELED  # finished: read, not forwarded
        local = await other.send(request_id=request_id_in(other.deps.engine.ownership.held, 4))
        own = await other.stub.Cancel(send_pb2.CancelRequest(request_id=local.request_id), timeout=10)
        assert own.canceled and own.state == S.SEND_STATE_CANCELED  # its own shard: no forwarding
    finally:
        await watch.close()
        await other.stop()
        await owner.stop()


async def test_resend_through_a_non_owner_is_forwarded_to_the_owner(mesh: Mesh, tmp_path: Path) -> None:
    db = tmp_path / "msg.db"
    owner = await start_send(mesh, db, SEND_RETRIES="0")
    other = await start_send(mesh, db, SEND_RETRIES="0")
    await shares([owner, other], [2, 2])
    watch = Watch(owner)
    try:
        reply = await other.send(request_id=request_id_in(owner.deps.engine.ownership.held, 4))
        failed = await watch.until(reply.request_id, S.SEND_STATE_FAILED)  # no peer, no retry
        assert failed.error.kind == common_pb2.MESSAGE_ERROR_KIND_NO_PEERS
        _, sink = await mesh.peer()
        out = await other.stub.Resend(send_pb2.ResendRequest(request_id=reply.request_id), timeout=10)
        assert out.rescheduled and out.state == S.SEND_STATE_QUEUED
        done = await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED)
        assert [e.hash for e in await sink.wait_for(1)] == [done.envelope_hash]
    finally:
        await watch.close()
        await other.stop()
        await owner.stop()


async def test_cancel_while_the_owner_is_dead_is_unavailable_until_its_shard_is_taken_over(
    mesh: Mesh, tmp_path: Path
) -> None:
    db = tmp_path / "msg.db"
    owner = await start_send(mesh, db, SEND_BACKOFF_SECONDS="60")
    other = await start_send(mesh, db, SEND_BACKOFF_SECONDS="60")
    await shares([owner, other], [2, 2])
    watch = Watch(other, after=b"")
    try:
        reply = await other.send(request_id=request_id_in(owner.deps.engine.ownership.held, 4))
        await watch.until(reply.request_id, S.SEND_STATE_RETRY_WAIT)
        await owner.stop(release=False)  # dies holding its leases and membership
        refusals: set[grpc.StatusCode] = set()
        async with asyncio.timeout(30):
            while True:
                try:
                    request = send_pb2.CancelRequest(request_id=reply.request_id)
                    out = await other.stub.Cancel(request, timeout=10)
                    break
                except grpc.aio.AioRpcError as err:
                    refusals.add(err.code())
                    await asyncio.sleep(0.1)
        assert refusals <= {grpc.StatusCode.UNAVAILABLE}  # retryable, never a wrong answer
        assert out.canceled and out.state == S.SEND_STATE_CANCELED  # by the new owner
        await shares([other], [4])
    finally:
        await watch.close()
        await other.stop()
