"""Other services as the health service sees them: edge peers (NodeInfo, ListPeers) and ``grpc.health.v1``.

One channel per target, shared by every client of that target (:class:`Channels`). Every call carries
``HEALTH_CALL_TIMEOUT_SECONDS`` as its deadline (:func:`meshcore.remaining_timeout`) and nothing is retried:
the next evaluation is the retry, and a stale answer is worse than "unreachable" for a health signal. The
channels reconnect within about a second of a target coming back (gRPC's default backoff grows to 120 s,
which would keep a recovered archive looking dead for minutes).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from meshcore import make_channel, remaining_timeout, translate_rpc_error
from services.health.logic import ServingStatus

__all__ = ["EDGE_PEER_SERVICE", "GRPC_SERVICES", "Channels", "EdgePeerClient", "HealthCheckClient"]

EDGE_PEER_SERVICE = "mailmesh.edgepeer.v1.EdgePeerService"
#: The gRPC service each mesh service registers, by mesh name: what ``grpc.health.v1`` is asked about.
GRPC_SERVICES = {
    "edge-peer": EDGE_PEER_SERVICE,
    "ingest": "mailmesh.ingest.v1.IngestService",
    "archive": "mailmesh.archive.v1.ArchiveService",
    "history-query": "mailmesh.history.v1.HistoryQueryService",
    "send": "mailmesh.send.v1.SendService",
    "subscription": "mailmesh.subscription.v1.SubscriptionService",
    "gateway": "",  # no gRPC service of its own: its whole server goes SERVING once the REST API listens
}
_HEALTH_SERVICE = "grpc.health.v1.Health"
_SERVING = {
    health_pb2.HealthCheckResponse.UNKNOWN: ServingStatus.UNKNOWN,
    health_pb2.HealthCheckResponse.SERVING: ServingStatus.SERVING,
    health_pb2.HealthCheckResponse.NOT_SERVING: ServingStatus.NOT_SERVING,
    health_pb2.HealthCheckResponse.SERVICE_UNKNOWN: ServingStatus.SERVICE_UNKNOWN,
}
# Reconnect at most ~1 s after a target comes back; gRPC's default backoff (doc/connection-backoff.md: 1 s,
# x1.6 per failure, up to 120 s) would keep a target that was down for a while looking dead for minutes.
_RECONNECT_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class Channels:
    """One ``grpc.aio`` channel per target, opened on first use (call from a coroutine)."""

    def __init__(
        self,
        *,
        timeout_s: float,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        """Deadline of every call, seconds."""
        self._registry = registry
        self._tracer_provider = tracer_provider
        self._channels: dict[str, grpc.aio.Channel] = {}

    def get(self, target: str) -> grpc.aio.Channel:
        """The channel to ``target``."""
        channel = self._channels.get(target)
        if channel is None:
            channel = self._channels[target] = make_channel(
                target,
                service_name=_HEALTH_SERVICE,
                timeout_s=self.timeout_s,
                registry=self._registry,
                tracer_provider=self._tracer_provider,
                options=_RECONNECT_OPTIONS,
            )
        return channel

    @property
    def targets(self) -> frozenset[str]:
        """The targets with an open channel."""
        return frozenset(self._channels)

    async def retain(self, targets: Collection[str]) -> None:
        """Close the channels of every target but ``targets`` (instances that are gone)."""
        gone = [t for t in self._channels if t not in targets]
        for target in gone:
            await self._channels.pop(target).close()

    async def close(self) -> None:
        """Close every channel (pending calls are cancelled)."""
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()


class EdgePeerClient:
    """An edge-peer instance's NodeInfo and ListPeers; implements ``monitor.EdgePeerPort``."""

    def __init__(self, channels: Channels, target: str) -> None:
        self._target = target
        self._stub = edgepeer_pb2_grpc.EdgePeerServiceStub(channels.get(target))
        self._timeout_s = channels.timeout_s

    @property
    def target(self) -> str:
        """The instance's gRPC target."""
        return self._target

    async def node_info(self) -> tuple[str, bytes]:
        """EdgePeerService.NodeInfo: (instance name, node ID)."""
        try:
            reply = await self._stub.NodeInfo(
                edgepeer_pb2.NodeInfoRequest(), timeout=remaining_timeout(self._timeout_s)
            )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        return reply.instance, reply.node_id

    async def list_peers(self) -> Mapping[bytes, str]:
        """EdgePeerService.ListPeers: node ID → negotiated capability of every handshaken Waku peer."""
        try:
            reply = await self._stub.ListPeers(
                edgepeer_pb2.ListPeersRequest(), timeout=remaining_timeout(self._timeout_s)
            )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        return {peer.peer_id: peer.capability for peer in reply.peers}


class HealthCheckClient:
    """``grpc.health.v1.Health/Check`` on one target; implements ``monitor.HealthCheckPort``."""

    def __init__(self, channels: Channels, target: str) -> None:
        self._target = target
        self._stub = health_pb2_grpc.HealthStub(channels.get(target))
        self._timeout_s = channels.timeout_s

    @property
    def target(self) -> str:
        """The gRPC target checked."""
        return self._target

    async def check(self, grpc_service: str) -> ServingStatus:
        """The serving status of ``grpc_service``; a server that does not know the name answers NOT_FOUND
        (grpc.health.v1 ``Check``), which is SERVICE_UNKNOWN here: something else listens on that port."""
        try:
            reply = await self._stub.Check(
                health_pb2.HealthCheckRequest(service=grpc_service),
                timeout=remaining_timeout(self._timeout_s),
            )
        except grpc.aio.AioRpcError as err:
            if err.code() is grpc.StatusCode.NOT_FOUND:
                return ServingStatus.SERVICE_UNKNOWN
            raise translate_rpc_error(err) from err
        return _SERVING.get(reply.status, ServingStatus.UNKNOWN)
