"""Server-Sent Events fan-out: one upstream ``StreamEvents`` per distinct filter, shared by every SSE client
that asked for that filter, with a bounded queue per client.

A :class:`Feed` follows ``SubscriptionService.StreamEvents`` from the head it found when it was created,
encodes each event once as an SSE frame (``id``, ``event``, ``data``; WHATWG HTML "Server-sent events") and
offers it to every attached :class:`SseClient`. A client whose queue is full is marked dropped (it ends its
stream and resumes with ``Last-Event-ID``), so one slow reader never holds the others back or grows the
gateway's memory. When the upstream stream fails the feed reconnects after the last sequence it delivered,
so its clients miss nothing; if even that is past the subscription service's retention window, its clients
get a ``gap`` frame and the feed continues with everything still retained. The last client to leave stops
the feed.

Catching up (:meth:`EventHub.catch_up`): a client resuming after sequence R first gets the retained events
after R from ``PollEvents`` pages, then its queue, skipping what the pages already gave; a resume point past
retention yields a ``gap`` frame, then everything retained.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass

import grpc

from mailmesh.subscription.v1 import subscription_pb2 as sub_pb2
from services.gateway.clients import Upstream
from services.gateway.convert import event_json
from services.gateway.errors import UpstreamError
from services.gateway.metrics import GatewayMetrics

__all__ = ["EventHub", "FilterKey", "Frame", "SseClient", "encode_event", "event_filter", "gap_frame"]

_log = logging.getLogger(__name__)
FilterKey = tuple[tuple[int, ...], str, str]
"""(event types, subscription id, request id): what one feed streams."""
_PAGE = 1000  # PollEvents: at most 1000 events per response
_BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 2.0)  # between upstream reconnects after a failure


@dataclass(frozen=True, slots=True)
class Frame:
    """One encoded SSE frame: an event (with its sequence) or a gap notice (sequence 0)."""

    sequence: int
    data: bytes


def encode_event(event: sub_pb2.Event) -> Frame:
    """The SSE frame of one event: ``id`` is the sequence (what ``Last-Event-ID`` brings back)."""
    data = json.dumps(event_json(event), separators=(",", ":"))
    return Frame(event.sequence, f"id: {event.sequence}\nevent: {event.name}\ndata: {data}\n\n".encode())


def gap_frame(after: int, oldest: int) -> Frame:
    """The ``gap`` frame: events after ``after`` and before ``oldest`` are gone (past retention)."""
    data = json.dumps({"after": after, "oldest": oldest}, separators=(",", ":"))
    return Frame(0, f"event: gap\ndata: {data}\n\n".encode())


def event_filter(key: FilterKey) -> sub_pb2.EventFilter:
    """The EventFilter proto of ``key``."""
    types, subscription_id, request_id = key
    flt = sub_pb2.EventFilter(subscription_id=subscription_id, request_id=request_id)
    flt.types.extend(sub_pb2.EventType.ValueType(t) for t in types)
    return flt


class SseClient:
    """One SSE connection's bounded queue of frames."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.dropped = False
        """True once a frame did not fit: the stream must end (the client resumes)."""
        self.closed = False
        """True when the gateway shuts down: the stream ends with a final comment."""
        self._frames: deque[Frame] = deque()
        self._wake = asyncio.Event()

    def offer(self, frame: Frame) -> bool:
        """Queue ``frame``; False (and dropped) when the queue is full."""
        if len(self._frames) >= self.capacity:
            self.dropped = True
            self._wake.set()
            return False
        self._frames.append(frame)
        self._wake.set()
        return True

    def close(self) -> None:
        """End the stream (gateway shutdown)."""
        self.closed = True
        self._wake.set()

    async def take(self, timeout: float) -> list[Frame]:
        """Every queued frame, waiting up to ``timeout`` for one; empty on timeout, drop or close."""
        if not self._frames and not (self.dropped or self.closed):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
        self._wake.clear()
        frames = list(self._frames)
        self._frames.clear()
        return frames


class Feed:
    """One upstream StreamEvents for one filter, fanned out to its clients."""

    def __init__(self, hub: EventHub, key: FilterKey, start: int) -> None:
        self.key = key
        self.last = start
        """The last sequence this feed delivered (its resume point)."""
        self.clients: set[SseClient] = set()
        self._hub = hub
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Follow the upstream stream in a task."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"sse-feed-{self.key}")

    async def stop(self) -> None:
        """Stop following (the last client left, or shutdown)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _deliver(self, frame: Frame) -> None:
        for client in list(self.clients):
            if not client.offer(frame):
                self.clients.discard(client)
                self._hub.metrics.sse_dropped.inc()

    async def _run(self) -> None:
        failures = 0
        while True:
            request = sub_pb2.StreamEventsRequest(filter=event_filter(self.key), after_sequence=self.last)
            try:
                async for event in self._hub.upstream.stream_events(request):
                    failures = 0
                    if event.sequence > self.last:
                        self.last = event.sequence
                        self._deliver(encode_event(event))
                why = "ended"  # the subscription service closed it (shutting down): reconnect
            except UpstreamError as err:
                if err.code is grpc.StatusCode.OUT_OF_RANGE:
                    oldest = int(err.trailers.get("oldest", "0") or 0)
                    self._deliver(gap_frame(self.last, oldest))
                    self.last = 0  # everything still retained
                    continue
                if err.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
                    continue  # this feed read too slowly: resume at once after its last event
                why = err.code.name
            delay = _BACKOFF_S[min(failures, len(_BACKOFF_S) - 1)]
            failures += 1
            _log.info("event stream %s; resuming after %d in %.1f s", why, self.last, delay)
            await asyncio.sleep(delay)  # reconnect backoff, not a synchronisation


class EventHub:
    """Every feed, by filter; clients attach to the feed of their filter."""

    def __init__(self, upstream: Upstream, metrics: GatewayMetrics, *, capacity: int) -> None:
        self.upstream = upstream
        self.metrics = metrics
        self._capacity = capacity
        self._feeds: dict[FilterKey, Feed] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    async def head(self, key: FilterKey) -> int:
        """The newest event sequence now (PollEvents without a resume point, not waiting)."""
        reply = await self.upstream.poll_events(
            sub_pb2.PollEventsRequest(filter=event_filter(key), limit=1), 0.0
        )
        return reply.last_sequence

    async def attach(self, key: FilterKey) -> tuple[SseClient, int]:
        """A new client on the feed of ``key`` (started if needed) and the sequence from which its queue is
        complete; :meth:`detach` it when its stream ends."""
        client = SseClient(self._capacity)
        async with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                feed = Feed(self, key, await self.head(key))
                self._feeds[key] = feed
                feed.start()
            feed.clients.add(client)
            joined_at = feed.last
        if self._closed:
            client.close()
        self.metrics.sse_clients.inc()
        return client, joined_at

    async def detach(self, key: FilterKey, client: SseClient) -> None:
        """``client``'s stream ended; the last client of a feed stops it."""
        self.metrics.sse_clients.dec()
        feed = self._feeds.get(key)
        if feed is None:
            return
        feed.clients.discard(client)
        if not feed.clients:
            del self._feeds[key]
            await feed.stop()

    async def catch_up(self, key: FilterKey, after: int, until: int) -> AsyncGenerator[Frame, None]:
        """Retained events after ``after`` up to at least ``until``, in pages; a ``gap`` frame first when
        ``after`` is past retention."""
        while after < until:
            request = sub_pb2.PollEventsRequest(filter=event_filter(key), after_sequence=after, limit=_PAGE)
            try:
                reply = await self.upstream.poll_events(request, 0.0)
            except UpstreamError as err:
                if err.code is not grpc.StatusCode.OUT_OF_RANGE:
                    raise
                yield gap_frame(after, int(err.trailers.get("oldest", "0") or 0))
                after = 0
                continue
            for event in reply.events:
                yield encode_event(event)
            if not reply.events or reply.last_sequence <= after:
                return
            after = reply.last_sequence

    async def close(self) -> None:
        """Shutdown: every client's stream ends; every feed stops."""
        self._closed = True
        feeds = list(self._feeds.values())
        for feed in feeds:
            for client in feed.clients:
                client.close()
        for feed in feeds:
            await feed.stop()

    @property
    def feeds(self) -> Iterable[Feed]:
        """The running feeds."""
        return tuple(self._feeds.values())
