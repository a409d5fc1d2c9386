"""Other services as the send service sees them: edge peers, history-query, health and the subscription
service (which topics active subscriptions cover); the other send replicas are in services.send.replicas.

Every unary call carries a deadline (:func:`meshcore.remaining_timeout`); a gRPC failure becomes a meshcore
error (``translate_rpc_error``). A Publish that fails on one edge peer does not fail the attempt: the
attempt is sent when any edge peer relayed the envelope, and an unreachable edge peer counts as "no peer"
(the brief's failure definition; MESSAGING-API "Retry": the decision rests on the peers' responses).
"""

from __future__ import annotations

import asyncio
import functools
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
from mailmesh.subscription.v1 import subscription_pb2, subscription_pb2_grpc
from meshcore import make_channel, remaining_timeout, translate_rpc_error
from meshcore.errors import MeshError
from meshcore.protoconv import duration
from meshcore.tracing import start_span, traceparent
from msgapi.config import parse_content_topic
from msgstore.types import HealthStatus, OutboxEntry
from services.send.batching import GroupCommit
from services.send.ports import PublishOutcome

__all__ = ["EdgePeers", "HealthFollower", "HistoryLookup", "SubscriptionCoverage", "channel"]

_log = logging.getLogger(__name__)
_PUBLISHED = edgepeer_pb2.PUBLISH_STATUS_PUBLISHED
_ALREADY_KNOWN = edgepeer_pb2.PUBLISH_STATUS_ALREADY_KNOWN
_REJECTED = edgepeer_pb2.PUBLISH_STATUS_REJECTED
_POW_CACHE_S = 2.0  # the peers' PoW requirements are read at most this often
_BATCH = 256  # envelopes per shared Publish call (the edge peer takes up to 1000)
_BATCH_BYTES = 4 << 20  # and their bytes: well under the 16 MiB gRPC message limit
#: One envelope waiting for a shared Publish call: raw RLP, hash, and its attempt's span context.
_Item = tuple[bytes, bytes, trace.SpanContext]
_TRACEPARENT_BYTES = 55  # "00-" 32 hex "-" 16 hex "-" 2 hex (Trace Context, "traceparent Header")
# Reconnect quickly after a dependency restarts (gRPC's default backoff grows to 120 s).
_RECONNECT = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


def channel(
    target: str,
    service: str,
    timeout_s: float,
    registry: CollectorRegistry,
    tp: trace.TracerProvider | None,
    idempotent: tuple[str, ...] = (),
) -> grpc.aio.Channel:
    """A channel to another service with the shared client set-up and a quick reconnect."""
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
    """Every edge-peer instance: Publish through all of them, and the PoW their Waku peers require.

    Concurrent attempts share Publish calls (group commit, :mod:`services.send.batching`): each call carries
    every envelope that became ready while the previous one was in flight (up to ``_BATCH`` envelopes and
    ``_BATCH_BYTES``), and the edge peer writes them to its Waku peers as one Messages packet. An envelope no
    ready peer admits does not hold the call back (the edge peer waits only for peers that admit an envelope
    and have not got it yet), so a batch costs its members nothing but a slow peer's write.

    Tracing follows the OpenTelemetry messaging conventions for batch publishing (semantic conventions for
    messaging spans, "Trace structure"): each envelope carries the ``traceparent`` of the attempt that
    published it (``PublishRequest.traceparents``), and the edge peer opens a span per envelope under it,
    so every attempt's trace reaches the edge peer whichever call carried its envelope. The call itself
    belongs to no single attempt: it runs under a ``send publish batch`` span that starts a trace of its own
    and links to every attempt's span.
    """

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
        self._channels = [channel(t, service, timeout, registry, tracer_provider) for t in targets]
        self._stubs = [
            (t, edgepeer_pb2_grpc.EdgePeerServiceStub(c))
            for t, c in zip(targets, self._channels, strict=True)
        ]
        self._publish_timeout_s = publish_timeout_s
        self._call_timeout_s = call_timeout_s
        self._tracer_provider = tracer_provider
        self._clock = clock
        self._pow = 0.0
        self._pow_read_at = -1e18
        self._batches = {
            ephemeral: GroupCommit[_Item, PublishOutcome](
                functools.partial(self._publish_batch, ephemeral=ephemeral),
                max_batch=_BATCH,
                size=lambda item: len(item[0]) + _TRACEPARENT_BYTES,
                max_size=_BATCH_BYTES,
            )
            for ephemeral in (False, True)
        }

    async def publish(self, raw: bytes, envelope_hash: bytes, *, ephemeral: bool) -> PublishOutcome:
        """Publish on every edge peer at once (in a shared call) and sum the Waku peers reached; the
        envelope carries the current span's trace context (the attempt's)."""
        origin = trace.get_current_span().get_span_context()
        return await self._batches[ephemeral].submit((raw, envelope_hash, origin))

    async def _publish_batch(self, items: Sequence[_Item], *, ephemeral: bool) -> list[PublishOutcome]:
        """One shared call under a span of its own, linked to each envelope's attempt.

        The flush runs in the group commit's task, whose context is that of the attempt that started it:
        without a new trace here every later call of that task would land in that one attempt's trace.
        """
        links = [
            trace.Link(origin, {"mailmesh.envelope_hash": envelope_hash.hex()})
            for _, envelope_hash, origin in items
            if origin.is_valid
        ]
        attributes = {"messaging.batch.message_count": len(items), "mailmesh.ephemeral": ephemeral}
        span = start_span(
            "send publish batch",
            kind=trace.SpanKind.PRODUCER,
            attributes=attributes,
            links=links,
            new_trace=True,
            tracer_provider=self._tracer_provider,
        )
        with trace.use_span(span, end_on_exit=True):
            return await self._call(items, ephemeral=ephemeral)

    async def _call(self, items: Sequence[_Item], *, ephemeral: bool) -> list[PublishOutcome]:
        request = edgepeer_pb2.PublishRequest(
            envelopes=[raw for raw, _, _ in items],
            ephemeral=ephemeral,
            relay_timeout=duration(self._publish_timeout_s),
            traceparents=[traceparent(origin) for _, _, origin in items],
        )
        timeout = remaining_timeout(self._call_timeout_s + self._publish_timeout_s)
        results = await asyncio.gather(
            *(stub.Publish(request, timeout=timeout) for _, stub in self._stubs), return_exceptions=True
        )
        refused = any(
            isinstance(r, grpc.aio.AioRpcError) and r.code() is grpc.StatusCode.INVALID_ARGUMENT
            for r in results
        )
        if refused and len(items) > 1:
            # The edge peer refuses a whole call for one envelope it cannot take (over its max message size):
            # each envelope alone, so only that one fails.
            alone = [self._call([item], ephemeral=ephemeral) for item in items]
            return [outcome for outcomes in await asyncio.gather(*alone) for outcome in outcomes]
        answers: list[tuple[str, Sequence[edgepeer_pb2.PublishResult] | None]] = []
        for (target, _), result in zip(self._stubs, results, strict=True):
            if isinstance(result, grpc.aio.AioRpcError):
                answers.append(
                    (f"edge peer {target} unreachable: {translate_rpc_error(result).message}", None)
                )
            elif isinstance(result, BaseException):
                raise result
            else:
                answers.append((target, result.results))
        return [_outcome(item[1], index, answers) for index, item in enumerate(items)]

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


def _outcome(
    envelope_hash: bytes, index: int, answers: list[tuple[str, Sequence[edgepeer_pb2.PublishResult] | None]]
) -> PublishOutcome:
    """One envelope's outcome summed over the edge peers' answers (``None``: the call failed, and the first
    element is then why)."""
    relayed, faults, details = 0, [], []
    for target, results in answers:
        if results is None:
            details.append(target)
            continue
        item = results[index]
        if item.status in (_PUBLISHED, _ALREADY_KNOWN):
            relayed += item.relayed_to
        if item.status == _REJECTED:
            faults.append(int(item.fault))
        if item.relayed_to == 0:
            details.append(f"edge peer {target}: {item.error or 'no Waku peer took the envelope'}")
    answered = sum(results is not None for _, results in answers)
    rejected = faults[0] if faults and len(faults) == answered and relayed == 0 else 0
    return PublishOutcome(envelope_hash, relayed, rejected_fault=rejected, detail="; ".join(details))


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
        self._channel = channel(target, service, call_timeout_s, registry, tracer_provider, ("Lookup",))
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
        self._channel = channel(target, service, 3600.0, registry, tracer_provider)
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


class SubscriptionCoverage:
    """The (pubsub topic, content topic) pairs the active subscriptions cover, read from
    SubscriptionService.ListSubscriptions every ``refresh_s`` seconds (MESSAGING-API "storeConfirmation":
    the store check starts once the Subscribe API was called for a topic).

    Fail-safe: a Send never waits for or fails on the subscription service; :meth:`covers` answers from the
    last list read (nothing before the first), and while the service cannot be read that list stands.
    """

    def __init__(
        self,
        target: str,
        *,
        refresh_s: float,
        call_timeout_s: float,
        on_read: Callable[[int], object] = lambda count: None,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        service = "mailmesh.subscription.v1.SubscriptionService"
        self._on_read = on_read
        self._channel = channel(target, service, call_timeout_s, registry, tracer_provider)
        self._stub = subscription_pb2_grpc.SubscriptionServiceStub(self._channel)
        self._refresh_s = refresh_s
        self._timeout_s = call_timeout_s
        self._covered: frozenset[tuple[str, str]] = frozenset()
        self._task: asyncio.Task[None] | None = None
        #: Successful reads so far (tests wait on it).
        self.reads = 0

    def covers(self, pubsub_topic: str, content_topic: str) -> bool:
        """Whether an active subscription (the background one included) covers the topic pair."""
        return (pubsub_topic, content_topic) in self._covered

    def start(self) -> None:
        """Begin refreshing (call from the event loop)."""
        self._task = asyncio.create_task(self._run())

    async def refresh(self) -> None:
        """Read the active subscriptions once; meshcore errors when the service cannot answer."""
        try:
            reply = await self._stub.ListSubscriptions(
                subscription_pb2.ListSubscriptionsRequest(), timeout=remaining_timeout(self._timeout_s)
            )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        covered: set[tuple[str, str]] = set()
        for sub in reply.subscriptions:
            for topic in sub.content_topics:
                try:
                    covered.add((sub.pubsub_topic, parse_content_topic(topic)))
                except ValueError:
                    continue  # a topic this node could not send to anyway
        self._covered = frozenset(covered)
        self.reads += 1
        self._on_read(len(covered))

    async def _run(self) -> None:
        reported = False  # one log line per outage, not one per retry
        while True:
            try:
                await self.refresh()
                reported = False
            except MeshError as err:
                if not reported:
                    _log.info("subscriptions unreadable (%s); the last list read stands", err.message)
                    reported = True
            await asyncio.sleep(self._refresh_s)

    async def close(self) -> None:
        """Stop refreshing and close the channel."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._channel.close()
