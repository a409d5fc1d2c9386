"""Other services as the send service sees them: edge peers, history-query and health.

Every unary call carries a deadline (:func:`meshcore.remaining_timeout`); a gRPC failure becomes a meshcore
error (``translate_rpc_error``). A Publish that fails on one edge peer does not fail the attempt: the
attempt is sent when any edge peer relayed the envelope, and an unreachable edge peer counts as "no peer"
(the brief's failure definition; MESSAGING-API "Retry": the decision rests on the peers' responses).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import grpc
import grpc.aio
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmesh.health.v1 import health_pb2, health_pb2_grpc
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from meshcore import make_channel, remaining_timeout, translate_rpc_error
from meshcore.protoconv import duration
from msgstore.types import HealthStatus, OutboxEntry
from services.send.ports import PublishOutcome

__all__ = ["EdgePeers", "HealthFollower", "HistoryLookup"]

_log = logging.getLogger(__name__)
_PUBLISHED = edgepeer_pb2.PUBLISH_STATUS_PUBLISHED
_ALREADY_KNOWN = edgepeer_pb2.PUBLISH_STATUS_ALREADY_KNOWN
_REJECTED = edgepeer_pb2.PUBLISH_STATUS_REJECTED
_POW_CACHE_S = 2.0  # the peers' PoW requirements are read at most this often
# Reconnect quickly after a dependency restarts (gRPC's default backoff grows to 120 s).
_RECONNECT = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


def _channel(
    target: str,
    service: str,
    timeout_s: float,
    registry: CollectorRegistry,
    tp: trace.TracerProvider | None,
    idempotent: tuple[str, ...] = (),
) -> grpc.aio.Channel:
    return make_channel(
        target,
        service_name=service,
        timeout_s=timeout_s,
        retry_attempts=3 if idempotent else 1,  # reads a replica refused UNAVAILABLE go to another
        idempotent_methods=idempotent,
        registry=registry,
        tracer_provider=tp,
        options=_RECONNECT,
    )


class EdgePeers:
    """Every edge-peer instance: Publish through all of them, and the PoW their Waku peers require."""

    def __init__(
        self,
        targets: Sequence[str],
        *,
        publish_timeout_s: float,
        call_timeout_s: float,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        service = "mailmesh.edgepeer.v1.EdgePeerService"
        timeout = call_timeout_s + publish_timeout_s
        self._channels = [_channel(t, service, timeout, registry, tracer_provider) for t in targets]
        self._stubs = [
            (t, edgepeer_pb2_grpc.EdgePeerServiceStub(c))
            for t, c in zip(targets, self._channels, strict=True)
        ]
        self._publish_timeout_s = publish_timeout_s
        self._call_timeout_s = call_timeout_s
        self._clock = clock
        self._pow = 0.0
        self._pow_read_at = -1e18

    async def publish(self, raw: bytes, envelope_hash: bytes, *, ephemeral: bool) -> PublishOutcome:
        """Publish on every edge peer at once and sum the Waku peers reached."""
        request = edgepeer_pb2.PublishRequest(
            envelopes=[raw], ephemeral=ephemeral, relay_timeout=duration(self._publish_timeout_s)
        )
        timeout = remaining_timeout(self._call_timeout_s + self._publish_timeout_s)
        results = await asyncio.gather(
            *(stub.Publish(request, timeout=timeout) for _, stub in self._stubs), return_exceptions=True
        )
        relayed, faults, details = 0, [], []
        for (target, _), result in zip(self._stubs, results, strict=True):
            if isinstance(result, grpc.aio.AioRpcError):
                details.append(f"edge peer {target} unreachable: {translate_rpc_error(result).message}")
                continue
            if isinstance(result, BaseException):
                raise result
            item = result.results[0]
            if item.status in (_PUBLISHED, _ALREADY_KNOWN):
                relayed += item.relayed_to
            if item.status == _REJECTED:
                faults.append(int(item.fault))
            if item.relayed_to == 0:
                details.append(f"edge peer {target}: {item.error or 'no Waku peer took the envelope'}")
        answered = len(self._stubs) - sum(isinstance(r, BaseException) for r in results)
        rejected = faults[0] if faults and len(faults) == answered and relayed == 0 else 0
        return PublishOutcome(envelope_hash, relayed, rejected_fault=rejected, detail="; ".join(details))

    async def pow_target(self) -> float:
        """The highest PoW requirement among the edge peers and their connected Waku peers (cached 2 s);
        an edge peer that does not answer is left out (its Publish will fail on its own)."""
        now = self._clock()
        if now - self._pow_read_at < _POW_CACHE_S:
            return self._pow
        timeout = remaining_timeout(self._call_timeout_s)
        calls = [stub.ListPeers(edgepeer_pb2.ListPeersRequest(), timeout=timeout) for _, stub in self._stubs]
        infos = [stub.NodeInfo(edgepeer_pb2.NodeInfoRequest(), timeout=timeout) for _, stub in self._stubs]
        answers = await asyncio.gather(*calls, *infos, return_exceptions=True)
        required = 0.0
        for answer in answers:
            if isinstance(answer, edgepeer_pb2.ListPeersResponse):
                required = max([required, *(p.pow_requirement for p in answer.peers)])
            elif isinstance(answer, edgepeer_pb2.NodeInfoResponse):
                required = max(required, answer.pow_requirement)
        self._pow, self._pow_read_at = required, now
        return required

    async def close(self) -> None:
        """Close the channels."""
        for channel in self._channels:
            await channel.close()


class HistoryLookup:
    """HistoryQueryService.Lookup: does the archive hold an envelope?"""

    def __init__(
        self,
        target: str,
        *,
        call_timeout_s: float,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        service = "mailmesh.history.v1.HistoryQueryService"
        self._channel = _channel(target, service, call_timeout_s, registry, tracer_provider, ("Lookup",))
        self._stub = history_pb2_grpc.HistoryQueryServiceStub(self._channel)
        self._timeout_s = call_timeout_s

    async def holds(self, entry: OutboxEntry) -> bool:
        """True when the archive holds the entry's envelope."""
        envelope_hash = entry.envelope_hash
        try:
            reply = await self._stub.Lookup(
                history_pb2.LookupRequest(envelope_hashes=[envelope_hash]),
                timeout=remaining_timeout(self._timeout_s),
            )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        return envelope_hash in reply.stored_envelope_hashes

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()


class HealthFollower:
    """Follows HealthService.WatchHealth (status changes) and hands each status to ``on_status``.

    The stream is reopened one second after it ends or fails; meanwhile the last status stands (a health
    service restart does not pause or resume sending by itself).
    """

    def __init__(
        self,
        target: str,
        on_status: Callable[[HealthStatus], None],
        *,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
        retry_s: float = 1.0,
    ) -> None:
        service = "mailmesh.health.v1.HealthService"
        self._channel = _channel(target, service, 3600.0, registry, tracer_provider)
        self._stub = health_pb2_grpc.HealthServiceStub(self._channel)
        self._on_status = on_status
        self._retry_s = retry_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin following (call from the event loop)."""
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        reported = False  # one log line per outage, not one per retry
        while True:
            try:
                call = self._stub.WatchHealth(
                    health_pb2.WatchHealthRequest(mode=health_pb2.WATCH_MODE_STATUS), timeout=None
                )
                async for reply in call:
                    reported = False
                    self._on_status(HealthStatus(reply.report.status))
            except grpc.aio.AioRpcError as err:
                if not reported:
                    _log.info("health watch ended (%s); reconnecting, last status stands", err.code().name)
                    reported = True
            await asyncio.sleep(self._retry_s)

    async def close(self) -> None:
        """Stop following and close the channel."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._channel.close()
