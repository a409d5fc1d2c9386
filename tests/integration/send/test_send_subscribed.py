"""Store confirmation for a content topic an active subscription covers (MESSAGING-API "storeConfirmation":
without ``confirmContentTopics`` the store check starts "only after the Subscribe API is called"). The send
service reads the subscriptions from SubscriptionService.ListSubscriptions — here a scripted stand-in on
port 0 whose list the test sets — and never waits for or fails on it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from mailmesh.common.v1 import common_pb2
from mailmesh.subscription.v1 import subscription_pb2 as pb
from mailmesh.subscription.v1 import subscription_pb2_grpc
from tests.integration.send.send_support import TOPIC, Mesh, SendHandle, start_send

DEFAULT_PUBSUB = "/waku/2/rs/1/0"  # MSGAPI_CLUSTER_ID 1, first of MSGAPI_SHARDS
OTHER = "/waku/1/0x01020304/rfc26"
CONFIGURED = "/waku/1/0x05060708/rfc26"


class Subscriptions(subscription_pb2_grpc.SubscriptionServiceServicer):
    """ListSubscriptions answers ``active``; the test edits it, or makes the service unavailable."""

    def __init__(self) -> None:
        self.active: list[pb.Subscription] = []
        self.down = False

    async def ListSubscriptions(self, request: pb.ListSubscriptionsRequest, context: Any) -> Any:
        if self.down:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "down for the test")
        return pb.ListSubscriptionsResponse(subscriptions=self.active)


@pytest.fixture
async def subscriptions() -> AsyncIterator[tuple[Subscriptions, str]]:
    servicer = Subscriptions()  # type: ignore[abstract]  # only ListSubscriptions is called
    server = grpc.aio.server()
    subscription_pb2_grpc.add_SubscriptionServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def _confirmed(handle: SendHandle, content_topic: str, pubsub_topic: str = "") -> bool:
    message = common_pb2.WakuMessage(payload=b"x", content_topic=content_topic)
    reply = await handle.send(message=message, pubsub_topic=pubsub_topic)
    return (await handle.status(reply.request_id)).progress.store_confirmation


async def _read(handle: SendHandle, reads: int) -> None:
    """Wait until the service has read the subscriptions ``reads`` times (bounded)."""
    coverage = handle.deps.coverage
    assert coverage is not None
    async with asyncio.timeout(30):
        while coverage.reads < reads:
            await asyncio.sleep(0.02)


async def test_a_topic_an_active_subscription_covers_is_store_confirmed(
    mesh: Mesh, tmp_path: Path, subscriptions: tuple[Subscriptions, str]
) -> None:
    fake, address = subscriptions
    fake.active = [pb.Subscription(subscription_id="s1", pubsub_topic=DEFAULT_PUBSUB, content_topics=[TOPIC])]
    env = {
        "MSGAPI_STORE_CONFIRMATION": "true",
        "SEND_SUBSCRIPTION_ADDR": address,
        "SEND_SUBSCRIPTION_REFRESH_SECONDS": "0.05",
    }
    handle = await start_send(mesh, tmp_path / "msg.db", **env)
    try:
        await _read(handle, 1)
        assert handle.metric("waku_send_subscribed_topics") == 1
        assert await _confirmed(handle, TOPIC)
        assert not await _confirmed(handle, OTHER)  # no subscription covers it
        assert not await _confirmed(handle, TOPIC, "/waku/2/rs/1/1")  # the same topic on another shard
        fake.active = []  # unsubscribed
        reads = handle.deps.coverage.reads if handle.deps.coverage else 0
        await _read(handle, reads + 1)
        assert not await _confirmed(handle, TOPIC)
    finally:
        await handle.stop()


async def test_an_unreadable_subscription_service_fails_no_send_and_the_last_list_stands(
    mesh: Mesh, tmp_path: Path, subscriptions: tuple[Subscriptions, str]
) -> None:
    fake, address = subscriptions
    fake.active = [pb.Subscription(subscription_id="s1", pubsub_topic=DEFAULT_PUBSUB, content_topics=[TOPIC])]
    env = {
        "MSGAPI_STORE_CONFIRMATION": "true",
        "MSGAPI_CONFIRM_CONTENT_TOPICS": CONFIGURED,
        "SEND_SUBSCRIPTION_ADDR": address,
        "SEND_SUBSCRIPTION_REFRESH_SECONDS": "0.05",
    }
    handle = await start_send(mesh, tmp_path / "msg.db", **env)
    try:
        await _read(handle, 1)
        fake.down = True
        fake.active = []  # unreadable now: the subscription read before still counts
        assert await _confirmed(handle, TOPIC)
        assert await _confirmed(handle, CONFIGURED)  # confirmContentTopics never depend on the service
        assert not await _confirmed(handle, OTHER)
    finally:
        await handle.stop()


async def test_a_send_service_that_never_reached_the_subscriptions_confirms_the_configured_topics(
    mesh: Mesh, tmp_path: Path
) -> None:
    env = {
        "MSGAPI_STORE_CONFIRMATION": "true",
        "MSGAPI_CONFIRM_CONTENT_TOPICS": CONFIGURED,
        "SEND_SUBSCRIPTION_ADDR": "127.0.0.1:9",  # nothing listens (discard port): never read
    }
    handle = await start_send(mesh, tmp_path / "msg.db", **env)
    try:
        assert await _confirmed(handle, CONFIGURED)
        assert not await _confirmed(handle, TOPIC)
    finally:
        await handle.stop()


async def test_without_store_confirmation_a_subscription_turns_nothing_on(
    mesh: Mesh, tmp_path: Path, subscriptions: tuple[Subscriptions, str]
) -> None:
    fake, address = subscriptions
    fake.active = [pb.Subscription(subscription_id="s1", pubsub_topic=DEFAULT_PUBSUB, content_topics=[TOPIC])]
    handle = await start_send(mesh, tmp_path / "msg.db", SEND_SUBSCRIPTION_ADDR=address)
    try:
        assert handle.deps.coverage is None  # "stored MUST NOT be populated": the list is not even read
        assert not await _confirmed(handle, TOPIC)
    finally:
        await handle.stop()
