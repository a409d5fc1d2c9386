"""The three services behind the gateway, one channel each, every call with a deadline.

Each method is one RPC: it passes ``timeout=`` (the service's deadline from the config, plus the wait of a
long poll) and turns a failed call into :class:`~.errors.UpstreamError` with the status and trailers, which
:mod:`.errors` maps to HTTP. Reads and the idempotent writes (Cancel, Unsubscribe) are retried on
UNAVAILABLE by the channel (meshcore service config); Send and Subscribe never are, because a retry could
apply them twice.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from typing import Any, TypeVar

import grpc
import grpc.aio
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.health.v1 import health_pb2, health_pb2_grpc
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from mailmesh.subscription.v1 import subscription_pb2 as sub_pb2
from mailmesh.subscription.v1 import subscription_pb2_grpc
from meshcore import make_channel
from meshcore.protoconv import duration
from meshcore.security import ChannelSecurity
from services.gateway.config import Config
from services.gateway.errors import UpstreamError

__all__ = ["UPSTREAM_SERVICES", "Upstream"]

T = TypeVar("T")
SEND = "mailmesh.send.v1.SendService"
SUBSCRIPTION = "mailmesh.subscription.v1.SubscriptionService"
HEALTH = "mailmesh.health.v1.HealthService"
UPSTREAM_SERVICES = (SEND, SUBSCRIPTION, HEALTH)
"""Every gRPC service the gateway calls: all of the client role (MESSAGING-API "send", "subscription",
"health"); a unit test checks that no method of theirs needs more."""
# Reconnect within about a second of an upstream coming back (gRPC's default backoff grows to 120 s).
_RECONNECT = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class Upstream:
    """Stubs of the send, subscription and health services (open from a coroutine; :meth:`close` at exit).

    ``security`` None: the process default (this service's TLS certificate and service token, installed by
    :func:`meshcore.setup_observability`). Every method here is an RPC of the client role
    (:data:`meshcore.auth.CLIENT_SERVICES`): nothing reachable through REST needs more.
    """

    def __init__(
        self,
        cfg: Config,
        *,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
        security: ChannelSecurity | None = None,
    ) -> None:
        def channel(target: str, service: str, timeout_s: float, idempotent: tuple[str, ...]) -> Any:
            return make_channel(
                target,
                service_name=service,
                timeout_s=timeout_s,
                retry_attempts=3,
                idempotent_methods=idempotent,
                registry=registry,
                tracer_provider=tracer_provider,
                max_message_bytes=cfg.runtime.max_message_bytes,
                options=_RECONNECT,
                security=security,
            )

        self._send_s = cfg.send_timeout_s
        self._sub_s = cfg.subscription_timeout_s
        self._health_s = cfg.health_timeout_s
        self._channels = [
            channel(
                cfg.send_addr, SEND, cfg.send_timeout_s, ("Cancel", "ListPendingRequests", "GetSendStatus")
            ),
            channel(
                cfg.subscription_addr,
                SUBSCRIPTION,
                cfg.subscription_timeout_s,
                ("Unsubscribe", "ListSubscriptions", "GetMessageRecord", "ListMessageRecords", "PollEvents"),
            ),
            channel(cfg.health_addr, HEALTH, cfg.health_timeout_s, ("GetHealth",)),
        ]
        self.send = send_pb2_grpc.SendServiceStub(self._channels[0])
        self.subscription = subscription_pb2_grpc.SubscriptionServiceStub(self._channels[1])
        self.health = health_pb2_grpc.HealthServiceStub(self._channels[2])

    async def close(self) -> None:
        """Close the channels (calls still open are cancelled)."""
        for channel in self._channels:
            await channel.close()

    # ------------------------------------------------------------------------------------------ send

    async def send_message(self, request: send_pb2.SendRequest) -> send_pb2.SendResponse:
        """SendService.Send."""
        return await _call("send", self.send.Send(request, timeout=self._send_s))

    async def cancel(self, request_id: str) -> send_pb2.CancelResponse:
        """SendService.Cancel."""
        request = send_pb2.CancelRequest(request_id=request_id)
        return await _call("send", self.send.Cancel(request, timeout=self._send_s))

    async def pending(self) -> list[str]:
        """SendService.ListPendingRequests."""
        request = send_pb2.ListPendingRequestsRequest()
        reply = await _call("send", self.send.ListPendingRequests(request, timeout=self._send_s))
        return list(reply.request_ids)

    # ------------------------------------------------------------------------------------------ subscription

    async def subscribe(self, pubsub_topic: str, content_topic: str) -> str:
        """SubscriptionService.Subscribe with one content topic."""
        request = sub_pb2.SubscribeRequest(pubsub_topic=pubsub_topic, content_topics=[content_topic])
        reply = await _call("subscription", self.subscription.Subscribe(request, timeout=self._sub_s))
        return str(reply.subscription_id)

    async def unsubscribe(self, subscription_id: str) -> None:
        """SubscriptionService.Unsubscribe."""
        request = sub_pb2.UnsubscribeRequest(subscription_id=subscription_id)
        await _call("subscription", self.subscription.Unsubscribe(request, timeout=self._sub_s))

    async def subscriptions(self) -> list[str]:
        """SubscriptionService.ListSubscriptions: the ids."""
        request = sub_pb2.ListSubscriptionsRequest()
        reply = await _call("subscription", self.subscription.ListSubscriptions(request, timeout=self._sub_s))
        return [s.subscription_id for s in reply.subscriptions]

    async def record(self, request: sub_pb2.GetMessageRecordRequest) -> Any:
        """SubscriptionService.GetMessageRecord: the record."""
        reply = await _call("subscription", self.subscription.GetMessageRecord(request, timeout=self._sub_s))
        return reply.record

    async def records(self, request: sub_pb2.ListMessageRecordsRequest) -> list[Any]:
        """SubscriptionService.ListMessageRecords, every chunk."""
        out: list[Any] = []
        try:
            async for chunk in self.subscription.ListMessageRecords(request, timeout=self._sub_s):
                out.extend(chunk.records)
        except grpc.aio.AioRpcError as err:
            raise UpstreamError.of("subscription", err) from err
        return out

    async def poll_records(
        self, request: sub_pb2.PollRecordsRequest, wait_s: float
    ) -> sub_pb2.PollRecordsResponse:
        """SubscriptionService.PollRecords waiting up to ``wait_s``."""
        request.wait.CopyFrom(duration(wait_s))
        call = self.subscription.PollRecords(request, timeout=self._sub_s + wait_s)
        return await _call("subscription", call)

    async def poll_events(
        self, request: sub_pb2.PollEventsRequest, wait_s: float
    ) -> sub_pb2.PollEventsResponse:
        """SubscriptionService.PollEvents waiting up to ``wait_s``."""
        request.wait.CopyFrom(duration(wait_s))
        call = self.subscription.PollEvents(request, timeout=self._sub_s + wait_s)
        return await _call("subscription", call)

    async def stream_events(
        self, request: sub_pb2.StreamEventsRequest
    ) -> AsyncGenerator[sub_pb2.Event, None]:
        """SubscriptionService.StreamEvents without a deadline (it runs until cancelled or failed)."""
        call = self.subscription.StreamEvents(request, timeout=None)
        try:
            async for reply in call:
                yield reply.event
        except grpc.aio.AioRpcError as err:
            raise UpstreamError.of("subscription", err) from err
        finally:
            call.cancel()  # closing this generator must end the RPC, not leave it open until collected

    # ------------------------------------------------------------------------------------------ health

    async def health_report(self) -> health_pb2.HealthReport:
        """HealthService.GetHealth: the current report."""
        request = health_pb2.GetHealthRequest()
        reply: health_pb2.GetHealthResponse = await _call(
            "health", self.health.GetHealth(request, timeout=self._health_s)
        )
        return reply.report

    async def health_watch(self, wait_s: float) -> AsyncGenerator[health_pb2.WatchHealthResponse, None]:
        """HealthService.WatchHealth (status changes), bounded by ``wait_s`` plus the health deadline."""
        request = health_pb2.WatchHealthRequest(mode=health_pb2.WATCH_MODE_STATUS)
        call = self.health.WatchHealth(request, timeout=self._health_s + wait_s)
        try:
            async for reply in call:
                yield reply
        except grpc.aio.AioRpcError as err:
            raise UpstreamError.of("health", err) from err
        finally:
            call.cancel()


async def _call(service: str, call: Awaitable[T]) -> T:
    try:
        return await call
    except grpc.aio.AioRpcError as err:
        raise UpstreamError.of(service, err) from err
