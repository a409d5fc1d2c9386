"""The send service over real gRPC against a real edge peer with real wakunode RLPx peers, a real
archive + ingest + history-query (store confirmation) and a real health service (pause/resume)."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2
from tests.integration.send.send_support import TOPIC, Mesh, S, Watch, start_send

NO_PEERS = common_pb2.MESSAGE_ERROR_KIND_NO_PEERS


def _seconds(ts: Timestamp) -> float:
    return ts.seconds + ts.nanos / 1e9


async def test_a_send_reaches_the_waku_peer_and_the_archive_confirms_it(mesh: Mesh, tmp_path: Path) -> None:
    _, sink = await mesh.peer()
    send = await start_send(mesh, tmp_path / "msg.db")
    watch = Watch(send)
    try:
        reply = await send.send(confirm_mode=send_pb2.CONFIRM_MODE_STORE)
        assert reply.created and len(reply.message_hash) == 32
        done = await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED)
        assert watch.states(reply.request_id) == [
            S.SEND_STATE_QUEUED,
            S.SEND_STATE_SENDING,
            S.SEND_STATE_AWAITING_STORE,
            S.SEND_STATE_SUCCEEDED,
        ]
        assert done.sent and done.stored and not done.sending and not done.HasField("error")
        assert done.progress.attempts == 1 and done.progress.relayed_peers == 1
        envelopes = await sink.wait_for(1)
        assert [e.hash for e in envelopes] == [done.envelope_hash]
        assert envelopes[0].data == b"hello" and envelopes[0].ttl == 120
        sequences = [c.sequence for c in watch.of(reply.request_id)]
        assert sequences == sorted(sequences) and len(set(sequences)) == 4
        status = await send.status(reply.request_id)
        assert status.progress.state == S.SEND_STATE_SUCCEEDED and status.stored
        assert send.metric("waku_send_requests_total", {"outcome": "succeeded"}) == 1
    finally:
        await watch.close()
        await send.stop()


async def test_no_peer_retries_after_1_2_4_seconds_then_fails_with_no_peers(
    mesh: Mesh, tmp_path: Path
) -> None:
    send = await start_send(mesh, tmp_path / "msg.db")
    watch = Watch(send)
    try:
        reply = await send.send()
        failed = await watch.until(reply.request_id, S.SEND_STATE_FAILED)
        assert failed.progress.attempts == 4 and not failed.sending and not failed.sent
        assert failed.error.kind == NO_PEERS and "gave up after 4 attempts" in failed.error.detail
        changes = watch.of(reply.request_id)
        waits = [c for c in changes if c.progress.state == S.SEND_STATE_RETRY_WAIT]
        starts = [c for c in changes if c.progress.state == S.SEND_STATE_SENDING]
        assert len(waits) == 3 and len(starts) == 4
        delays = [_seconds(w.progress.next_attempt_at) - _seconds(w.updated_at) for w in waits]
        assert delays == pytest.approx([1.0, 2.0, 4.0], abs=1e-6)
        for wait, start in zip(waits, starts[1:], strict=True):
            due, began = _seconds(wait.progress.next_attempt_at), _seconds(start.progress.last_attempt_at)
            assert due <= began < due + 1.0  # never early; late only by scheduling on a busy machine
    finally:
        await watch.close()
        await send.stop()


async def test_a_peer_connecting_after_the_first_failure_gets_the_retry(mesh: Mesh, tmp_path: Path) -> None:
    send = await start_send(mesh, tmp_path / "msg.db")
    watch = Watch(send)
    try:
        reply = await send.send()
        await watch.until(reply.request_id, S.SEND_STATE_RETRY_WAIT)
        _, sink = await mesh.peer()
        done = await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED)
        assert done.sent and done.progress.attempts >= 2 and not done.HasField("error")
        assert [e.hash for e in await sink.wait_for(1)] == [done.envelope_hash]
    finally:
        await watch.close()
        await send.stop()


async def test_unhealthy_pauses_and_healthy_resumes(mesh: Mesh, tmp_path: Path) -> None:
    await mesh.start_health()
    send = await start_send(mesh, tmp_path / "msg.db")
    watch = Watch(send)
    try:
        reply = await send.send()
        await watch.until(reply.request_id, S.SEND_STATE_PAUSED)
        assert send.metric("waku_send_paused") == 1
        pending = await send.stub.ListPendingRequests(send_pb2.ListPendingRequestsRequest(), timeout=10)
        assert list(pending.request_ids) == [reply.request_id]
        _, sink = await mesh.peer()
        done = await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED)
        states = watch.states(reply.request_id)
        assert states == [
            S.SEND_STATE_QUEUED,
            S.SEND_STATE_PAUSED,
            S.SEND_STATE_QUEUED,  # resumed as fresh: nothing was attempted while paused
            S.SEND_STATE_SENDING,
            S.SEND_STATE_SUCCEEDED,
        ]
        assert done.progress.attempts == 1
        assert [e.hash for e in await sink.wait_for(1)] == [done.envelope_hash]
    finally:
        await watch.close()
        await send.stop()


async def test_cancel_pending_finished_and_unknown(mesh: Mesh, tmp_path: Path) -> None:
    send = await start_send(mesh, tmp_path / "msg.db", SEND_BACKOFF_SECONDS="30")
    watch = Watch(send)
    try:
        waiting = await send.send()
        await watch.until(waiting.request_id, S.SEND_STATE_RETRY_WAIT)
        out = await send.stub.Cancel(send_pb2.CancelRequest(request_id=waiting.request_id), timeout=10)
        assert out.canceled and out.state == S.SEND_STATE_CANCELED
        canceled = await watch.until(waiting.request_id, S.SEND_STATE_CANCELED)
        assert not canceled.sending and canceled.progress.attempts == 1
        again = await send.stub.Cancel(send_pb2.CancelRequest(request_id=waiting.request_id), timeout=10)
        assert not again.canceled and again.state == S.SEND_STATE_CANCELED
        unknown = await send.stub.Cancel(send_pb2.CancelRequest(request_id=str(uuid.uuid4())), timeout=10)
        assert not unknown.canceled and unknown.state == S.SEND_STATE_UNSPECIFIED
        pending = await send.stub.ListPendingRequests(send_pb2.ListPendingRequestsRequest(), timeout=10)
        assert list(pending.request_ids) == []
    finally:
        await watch.close()
        await send.stop()


async def test_errors_have_the_spec_texts_and_send_is_idempotent(mesh: Mesh, tmp_path: Path) -> None:
    send = await start_send(mesh, tmp_path / "msg.db")
    try:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await send.send(pubsub_topic="/waku/2/rs/1/99")
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
        assert (
            err.value.details()
            == "Failed to send message. Target pubsubTopic '/waku/2/rs/1/99' not supported."
        )
        unknown = str(uuid.uuid4())
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await send.status(unknown)
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
        assert err.value.details() == f"Message with requestId '{unknown}' not found"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await send.stub.GetSendStatus(
                send_pb2.GetSendStatusRequest(message_hash=b"\x07" * 32), timeout=10
            )
        assert err.value.details() == f"Message with hash '0x{'07' * 32}' not found"
        rid = str(uuid.uuid4())
        first = await send.send(request_id=rid)
        repeat = await send.send(request_id=rid)
        assert first.created and not repeat.created and repeat.message_hash == first.message_hash
        with pytest.raises(grpc.aio.AioRpcError) as err:
            other = common_pb2.WakuMessage(payload=b"other", content_topic=TOPIC)
            await send.send(request_id=rid, message=other)
        assert err.value.code() is grpc.StatusCode.ALREADY_EXISTS
        by_hash = await send.stub.GetSendStatus(
            send_pb2.GetSendStatusRequest(message_hash=first.message_hash), timeout=10
        )
        assert by_hash.status.request_id == rid
    finally:
        await send.stop()


async def test_store_nodes_are_asked_over_the_mailserver_protocol(mesh: Mesh, tmp_path: Path) -> None:
    """MSGAPI_STORE_NODES = the edge peer's enode: the check is a 0x7e request (topic + window) answered by
    its mailserver from the archive; history-query's Lookup is unreachable here, so it did not answer."""
    _, sink = await mesh.peer()
    send = await start_send(
        mesh, tmp_path / "msg.db", MSGAPI_STORE_NODES=mesh.edge.enode, SEND_HISTORY_ADDR="127.0.0.1:1"
    )
    watch = Watch(send)
    try:
        reply = await send.send(confirm_mode=send_pb2.CONFIRM_MODE_STORE)
        done = await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED)
        assert done.stored and done.progress.attempts == 1
        assert S.SEND_STATE_AWAITING_STORE in watch.states(reply.request_id)
        assert [e.hash for e in await sink.wait_for(1)] == [done.envelope_hash]
    finally:
        await watch.close()
        await send.stop()
