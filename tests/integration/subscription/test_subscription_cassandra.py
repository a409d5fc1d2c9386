"""The subscription service over the real local Cassandra node: subscribe, a received message with its events
in order, skip/take, and a replay after a restart of the service on the same keyspace (the module's own,
``mmt_test_subscription_cassandra_<pid>``, dropped at the end; the node is shared and never touched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailmesh.subscription.v1 import subscription_pb2 as pb
from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.subscription.subscription_support import (
    FakeFeeds,
    open_events,
    start_subscription,
    subscription_env,
    wait_until,
)
from tools.cassandra import ctl
from wakucodec.contenttopic import content_topic_to_v1_topic

pytestmark = pytest.mark.cassandra

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace

CHAT = "/app/1/chat/proto"
TOPIC = content_topic_to_v1_topic(CHAT)


async def test_records_and_events_on_cassandra_survive_a_restart(
    tmp_path: Path, cassandra_node: ctl.NodeConfig, cassandra_keyspace: str
) -> None:
    env = subscription_env(
        tmp_path / "unused.db",  # the SQLite path is not used with MSGSTORE_BACKEND=cassandra
        MSGSTORE_BACKEND="cassandra",
        MSGSTORE_CASSANDRA_HOSTS=cassandra_node.host,
        MSGSTORE_CASSANDRA_PORT=str(cassandra_node.native_port),
        MSGSTORE_CASSANDRA_KEYSPACE=cassandra_keyspace,
        MSGSTORE_CASSANDRA_CONSISTENCY="ONE",
        SUBSCRIPTION_WRITER_LEASE_SECONDS="3",
    )
    fakes = FakeFeeds()
    first = await start_subscription(env, fakes.feeds())
    try:
        await wait_until(lambda: first.is_writer, timeout=30, what="writer lease (Cassandra LWT)")
        sid = await first.subscribe(CHAT)
        stream = open_events(
            first, after=0, types=[pb.EVENT_TYPE_MESSAGE_RECEIVED, pb.EVENT_TYPE_MESSAGE_CHANGE]
        )
        await wait_until(lambda: any(TOPIC in r[0] for r in fakes.edge.requests), what="feed opened")
        for i in range(4):
            fakes.edge.push(TOPIC, bytes([i]), 1_700_000_000 + i, (i + 1).to_bytes(32, "big"))
        events = await stream.take(8)
        assert [e.name for e in events] == ["message:received", "message:change"] * 4
        assert [e.sequence for e in events] == sorted({e.sequence for e in events})
        stream.cancel()
        payloads = [r.message.payload for r in await first.list_records(subscription_id=sid)]
        assert payloads == [bytes([i]) for i in range(4)]
        assert [
            r.message.payload for r in await first.list_records(skip=1, take=2, content_topic=CHAT)
        ] == payloads[1:3]
        assert await first.list_records(skip=4, content_topic=CHAT) == []
        assert await first.list_records(take=0, subscription_id=sid) == []
    finally:
        await first.stop()
    second = await start_subscription(env, FakeFeeds().feeds())
    try:
        replay = open_events(second, after=events[3].sequence)
        rest = await replay.take(4)
        assert [e.sequence for e in rest] == [e.sequence for e in events[4:]]
        replay.cancel()
        listed = (
            await second.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), timeout=10)
        ).subscriptions
        assert [s.subscription_id for s in listed] == [sid]
    finally:
        await second.stop()
