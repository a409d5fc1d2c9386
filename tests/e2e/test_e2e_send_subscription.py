"""Send and subscription services paired for real: the whole mesh as processes (archive, ingest, history, edge
peer, health, send, subscription) and one real wakunode RLPx peer connected to the edge peer.

- A message sent through ``SendService.Send`` reaches the RLPx peer, is archived the normal way (relay ->
  ingest -> archive), and its record goes sending -> sent -> stored; the events come in the order
  MESSAGING-API "Event source" requires (``message:sent`` before ``message:stored``, each followed by the
  ``message:change`` of the same update), with strictly increasing sequences.
- An envelope the RLPx peer posts on the subscribed topic becomes a ``received`` record with
  ``message:received``.
- A content topic outside ``MSGAPI_CONFIRM_CONTENT_TOPICS`` is store-confirmed once a subscription covers it
  (MESSAGING-API "storeConfirmation"): the send service reads the real subscription service's list.
- Every service exits 0 on SIGTERM and no log holds an unexpected WARNING/ERROR line.

Waits are event-driven: the StreamEvents stream (opened before the Send) and the peer's sink.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from mailmesh.subscription.v1 import subscription_pb2 as pb
from mailmesh.subscription.v1 import subscription_pb2_grpc
from meshharness import FreePorts, ServiceProcess, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from msgapi.config import RESERVED_SUBSCRIPTION_ID
from tests.e2e.e2e_rlpx_support import START_DEADLINE_S, STOP_GRACE_S, _enode, assert_clean_stop
from tests.integration.edge_peer.edge_peer_support import envelopes, relay_client
from wakunode.memory import MemorySink

TOPIC = b"\x0e\x0f\x10\x12"
BRIDGED = "/waku/1/0x0e0f1012/rfc26"
SUBSCRIBED_ONLY = "/waku/1/0x0e0f1013/rfc26"
EVENT_WAIT_S = 60.0  # one bound for a whole wait; the events themselves end each wait


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[ProcessMesh]:
    (tmp_path / "cursor.secret").write_text("22" * 32 + "\n")
    (tmp_path / "cursor.secret").chmod(0o600)
    messaging = {  # one node-wide configuration (MESSAGING-API "Initial configuration")
        "MSGSTORE_BACKEND": "sqlite",
        "MSGAPI_STORE_CONFIRMATION": "true",
        "MSGAPI_CONFIRM_CONTENT_TOPICS": BRIDGED,
        "MSGAPI_STORE_CHECK_INTERVAL_SECONDS": "0.3",
    }

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer", "health", "send", "subscription"],
            ports=FreePorts(),
            state_dir=tmp_path,
            env={
                "archive": {"ARCHIVE_BACKEND": "sqlite"},
                "ingest": {"INGEST_MIN_POW": "0"},
                "edge_peer": {"EDGE_MIN_POW": "0"},
                "health": {  # one RLPx peer makes the node MinimallyHealthy (and Healthy)
                    "HEALTH_MINIMALLY_HEALTHY_PEERS": "1",
                    "HEALTH_HEALTHY_PEERS": "1",
                    "HEALTH_HOLD_SECONDS": "0",
                    "HEALTH_SEND_ADDR": "",
                    "HEALTH_SUBSCRIPTION_ADDR": "",
                },
                "send": {
                    **messaging,
                    "SEND_STORE_CHECK_DELAY_SECONDS": "0.2",
                    "SEND_SUBSCRIPTION_REFRESH_SECONDS": "0.1",
                },
                "subscription": {**messaging, "SUBSCRIPTION_TAIL_INTERVAL_SECONDS": "0.05"},
            },
        )

    mesh = await asyncio.to_thread(start_mesh, specs, timeout=START_DEADLINE_S, log_dir=tmp_path / "logs")
    try:
        yield mesh
    finally:
        codes = await mesh.stop_async(STOP_GRACE_S)
    assert_clean_stop(mesh, codes)


async def subscribe(stub: subscription_pb2_grpc.SubscriptionServiceAsyncStub, topic: str = BRIDGED) -> str:
    """Subscribe once the replica holds the writer lease (until then it answers UNAVAILABLE)."""
    async with asyncio.timeout(EVENT_WAIT_S):
        while True:
            try:
                reply = await stub.Subscribe(pb.SubscribeRequest(content_topics=[topic]), timeout=5)
            except grpc.aio.AioRpcError as err:
                assert err.code() is grpc.StatusCode.UNAVAILABLE, err
                await asyncio.sleep(0.05)  # retry interval of a refused call, not a synchronisation
                continue
            return reply.subscription_id


async def events_until(call: object, last: str, key: str, value: object) -> list[pb.Event]:
    """Read events until one named ``last`` whose record has ``key`` == ``value``; the events read, in
    stream order."""
    read: list[pb.Event] = []
    async with asyncio.timeout(EVENT_WAIT_S):
        while True:
            reply = await call.read()  # type: ignore[attr-defined]
            assert reply is not grpc.aio.EOF
            read.append(reply.event)
            if reply.event.name == last and getattr(reply.event.record, key) == value:
                return read


async def covered(send: ServiceProcess, pairs: int) -> None:
    """Wait until the send service's last read of the subscriptions covers ``pairs`` topic pairs."""
    async with asyncio.timeout(EVENT_WAIT_S):
        while await asyncio.to_thread(send.metric, "waku_send_subscribed_topics") < pairs:
            await asyncio.sleep(0.05)  # the scrape interval, not a synchronisation


def names_of(events: list[pb.Event], key: str, value: object) -> list[str]:
    """The names of the ``message:*`` events of one record, in order."""
    return [e.name for e in events if e.HasField("record") and getattr(e.record, key) == value]


async def test_send_reaches_the_peer_and_its_record_goes_sent_then_stored_and_a_peer_message_is_received(
    processes: ProcessMesh,
) -> None:
    subscription: ServiceProcess = processes.get("subscription")
    send: ServiceProcess = processes.get("send")
    sink = MemorySink()
    client = relay_client(sink)
    await client.start()
    async with (
        grpc.aio.insecure_channel(subscription.address) as sub_channel,
        grpc.aio.insecure_channel(send.address) as send_channel,
    ):
        subs = subscription_pb2_grpc.SubscriptionServiceStub(sub_channel)
        sender = send_pb2_grpc.SendServiceStub(send_channel)
        try:
            info = await client.connect(_enode(processes.get("edge_peer")))
            sid = await subscribe(subs)
            events = subs.StreamEvents(pb.StreamEventsRequest(filter=pb.EventFilter()))

            message = common_pb2.WakuMessage(payload=b"paired", content_topic=BRIDGED)
            reply = await sender.Send(send_pb2.SendRequest(message=message), timeout=10)
            rid = reply.request_id
            seen = await events_until(events, "message:stored", "request_id", rid)
            seen += await events_until(events, "message:change", "request_id", rid)  # the stored update's

            (relayed,) = [e for e in await sink.wait_for(1, timeout=EVENT_WAIT_S) if e.topic == TOPIC]
            record = (
                await subs.GetMessageRecord(pb.GetMessageRecordRequest(request_id=rid), timeout=10)
            ).record
            assert (record.sending, record.sent, record.stored) == (False, True, True)
            assert record.envelope_hash == relayed.hash  # the envelope the peer got is the one archived
            names = names_of(seen, "request_id", rid)
            assert names.index("message:sent") < names.index("message:stored")
            for name in ("message:sent", "message:stored"):
                assert names[names.index(name) + 1] == "message:change", names
            sequences = [e.sequence for e in seen]
            assert sequences == sorted(set(sequences)), "strictly increasing"

            (posted,) = envelopes(1, topic=TOPIC, first=7)
            await client.post(info.pubkey, [posted])
            seen = await events_until(events, "message:received", "envelope_hash", posted.hash)
            received = seen[-1].record
            assert received.received
            # Ours, and the reserved one that monitors MSGAPI_CONFIRM_CONTENT_TOPICS (MESSAGING-API
            # "Initial configuration", `confirmContentTopics`).
            assert set(received.subscription_ids) == {sid, RESERVED_SUBSCRIPTION_ID}

            await subscribe(subs, SUBSCRIBED_ONLY)
            await covered(send, 2)  # BRIDGED (both subscriptions) and SUBSCRIBED_ONLY, on the default shard
            message = common_pb2.WakuMessage(payload=b"covered", content_topic=SUBSCRIBED_ONLY)
            rid = (await sender.Send(send_pb2.SendRequest(message=message), timeout=10)).request_id
            status = (
                await sender.GetSendStatus(send_pb2.GetSendStatusRequest(request_id=rid), timeout=10)
            ).status
            assert status.progress.store_confirmation
            await events_until(events, "message:stored", "request_id", rid)
            events.cancel()
        finally:
            await client.stop()
