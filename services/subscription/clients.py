"""Other services as the subscription service sees them: edge peers' live feeds, health, send, history.

Streams (StreamEnvelopes, WatchHealth, WatchSendStatuses, WatchServed) run on channels whose service-config
deadline is an hour: a stream that reaches it ends with DEADLINE_EXCEEDED and its follower resumes where it
was. The unary Lookup carries ``SUBSCRIPTION_CALL_TIMEOUT_SECONDS`` (:func:`meshcore.remaining_timeout`).
Every ``grpc.aio.AioRpcError`` becomes a :mod:`meshcore.errors` class (``translate_rpc_error``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc
import grpc.aio
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmesh.health.v1 import health_pb2, health_pb2_grpc
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from meshcore import make_channel, remaining_timeout, translate_rpc_error
from msgstore.types import HealthStatus
from services.subscription.convert import health_status, send_update_from_proto
from services.subscription.ports import FeedBatch, FeedEnvelope, SendFeedItem, ServedBatch
from services.subscription.rules import SendUpdate

__all__ = [
    "HISTORY_SERVICE",
    "Channels",
    "EdgeFeedClient",
    "HealthFeedClient",
    "LookupClient",
    "SendFeedClient",
    "ServedFeedClient",
]

#: The history-query service's name: its channels' service config, and what a gone instance's channel is.
HISTORY_SERVICE = "mailmesh.history.v1.HistoryQueryService"
_STREAM_DEADLINE_S = 3600.0
# Reads a replica refused UNAVAILABLE are retried on another (docs/reliability.md "When calls are retried").
_IDEMPOTENT = {HISTORY_SERVICE: ("Lookup",)}
# Reconnect at most ~1 s after a target comes back (gRPC's default backoff grows to 120 s).
_RECONNECT_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class Channels:
    """One channel per (target, service), opened on first use (call from a coroutine)."""

    def __init__(
        self, *, registry: CollectorRegistry = REGISTRY, tracer: trace.TracerProvider | None = None
    ) -> None:
        self._registry = registry
        self._tracer = tracer
        self._channels: dict[tuple[str, str], grpc.aio.Channel] = {}

    def get(self, target: str, service: str) -> grpc.aio.Channel:
        """The channel to ``service`` at ``target``."""
        key = (target, service)
        channel = self._channels.get(key)
        if channel is None:
            idempotent = _IDEMPOTENT.get(service, ())
            channel = self._channels[key] = make_channel(
                target,
                service_name=service,
                timeout_s=_STREAM_DEADLINE_S,
                retry_attempts=3 if idempotent else 1,
                idempotent_methods=idempotent,
                registry=self._registry,
                tracer_provider=self._tracer,
                options=_RECONNECT_OPTIONS,
            )
        return channel

    async def drop(self, target: str, service: str) -> None:
        """Close the channel to ``service`` at ``target``, if open (an instance that is gone)."""
        channel = self._channels.pop((target, service), None)
        if channel is not None:
            await channel.close()

    async def close(self) -> None:
        """Close every channel (pending calls are cancelled)."""
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()


class EdgeFeedClient:
    """One edge peer's StreamEnvelopes; implements ``ports.EdgeFeedPort``."""

    def __init__(self, channels: Channels, target: str) -> None:
        self._target = target
        self._stub = edgepeer_pb2_grpc.EdgePeerServiceStub(
            channels.get(target, "mailmesh.edgepeer.v1.EdgePeerService")
        )

    @property
    def target(self) -> str:
        """The instance's address."""
        return self._target

    async def stream(
        self, topics: Sequence[bytes], resume_epoch: str, after_sequence: int
    ) -> AsyncIterator[FeedBatch]:
        """StreamEnvelopes filtered by ``topics`` (never empty: empty would mean every envelope)."""
        request = edgepeer_pb2.StreamEnvelopesRequest(
            topics=list(topics), resume_epoch=resume_epoch, after_sequence=after_sequence
        )
        call = self._stub.StreamEnvelopes(request)
        try:
            async for reply in call:
                yield FeedBatch(
                    reply.epoch,
                    reply.resumed,
                    [
                        FeedEnvelope(
                            r.sequence,
                            r.envelope.hash,
                            r.envelope.topic,
                            r.envelope.data,
                            r.envelope.sent,
                            # acceptance time: orders the listings, and a subscription younger than an
                            # envelope (a replay) does not receive it (mapping.receptions)
                            r.received_at.ToNanoseconds() / 1e9 if r.HasField("received_at") else 0.0,
                        )
                        for r in reply.envelopes
                    ],
                )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        finally:
            call.cancel()


class HealthFeedClient:
    """WatchHealth in WATCH_MODE_STATUS; implements ``ports.HealthFeedPort``."""

    def __init__(self, channels: Channels, target: str) -> None:
        self._stub = health_pb2_grpc.HealthServiceStub(
            channels.get(target, "mailmesh.health.v1.HealthService")
        )

    async def watch(self) -> AsyncIterator[HealthStatus]:
        """The current status, then each change."""
        call = self._stub.WatchHealth(health_pb2.WatchHealthRequest(mode=health_pb2.WATCH_MODE_STATUS))
        try:
            async for reply in call:
                yield health_status(reply.report.status)
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        finally:
            call.cancel()


class SendFeedClient:
    """WatchSendStatuses and ListSendStatuses; implements ``ports.SendFeedPort``."""

    def __init__(self, channels: Channels, target: str) -> None:
        self._stub = send_pb2_grpc.SendServiceStub(channels.get(target, "mailmesh.send.v1.SendService"))

    async def watch(self, after_position: bytes) -> AsyncIterator[SendFeedItem]:
        """Changes after ``after_position`` (empty = everything retained), then live."""
        call = self._stub.WatchSendStatuses(send_pb2.WatchSendStatusesRequest(after_position=after_position))
        try:
            async for reply in call:
                yield SendFeedItem(
                    reply.position,
                    send_update_from_proto(reply.status) if reply.HasField("status") else None,
                    tuple(reply.gap_shards),
                )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        finally:
            call.cancel()

    async def statuses(self) -> AsyncIterator[SendUpdate]:
        """Every request the outbox holds, in listing order (chunks of at most 100)."""
        call = self._stub.ListSendStatuses(send_pb2.ListSendStatusesRequest())
        try:
            async for reply in call:
                for status in reply.statuses:
                    yield send_update_from_proto(status)
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        finally:
            call.cancel()


class LookupClient:
    """HistoryQueryService.Lookup by envelope hash; implements ``ports.LookupPort``."""

    def __init__(self, channels: Channels, target: str, *, timeout_s: float) -> None:
        self._stub = history_pb2_grpc.HistoryQueryServiceStub(channels.get(target, HISTORY_SERVICE))
        self._timeout_s = timeout_s

    async def stored(self, envelope_hashes: Sequence[bytes]) -> set[bytes]:
        """Which of the hashes the archive holds."""
        try:
            reply = await self._stub.Lookup(
                history_pb2.LookupRequest(envelope_hashes=list(envelope_hashes)),
                timeout=remaining_timeout(self._timeout_s),
            )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        return set(reply.stored_envelope_hashes)


class ServedFeedClient:
    """One history-query instance's WatchServed; implements ``ports.ServedFeedPort``."""

    def __init__(self, channels: Channels, target: str) -> None:
        self._target = target
        self._stub = history_pb2_grpc.HistoryQueryServiceStub(channels.get(target, HISTORY_SERVICE))

    @property
    def target(self) -> str:
        """The instance's address."""
        return self._target

    async def watch(self, resume_epoch: str, after_sequence: int) -> AsyncIterator[ServedBatch]:
        """Served chunks, resumed where the instance's ring allows."""
        request = history_pb2.WatchServedRequest(resume_epoch=resume_epoch, after_sequence=after_sequence)
        call = self._stub.WatchServed(request)
        try:
            async for reply in call:
                yield ServedBatch(
                    reply.epoch,
                    reply.resumed,
                    [(c.sequence, _split(c.envelope_hashes)) for c in reply.chunks],
                )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        finally:
            call.cancel()


def _split(packed: bytes) -> list[bytes]:
    """32-byte hashes out of their concatenation (a trailing partial hash is dropped)."""
    return [packed[i : i + 32] for i in range(0, len(packed) - 31, 32)]
