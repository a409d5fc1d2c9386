"""The event source over REST (MESSAGING-API "Event source": "For accessing events via the REST API, long
polling SHOULD be used"): `GET /events` (long poll) and `GET /events/stream` (Server-Sent Events).

Both serve the subscription service's event log: node-wide, strictly increasing sequences, retained for a
window (MSGSTORE_EVENT_RETENTION_SECONDS) and not deleted when read. A client resumes after the last
sequence it saw (``after=``, or SSE's ``Last-Event-ID``); a resume point past retention is a 410 on the long
poll and a ``gap`` event on the stream. Filters: ``types`` (event names, MESSAGING-API or WAKU-API spelling),
``subscriptionId`` and ``requestId`` (message events of that subscription or request; health events always
pass).

An SSE stream starts with ``retry: 1000``, writes each event as ``id: <sequence>``, ``event: <name>``,
``data: <JSON>`` (WHATWG HTML "Server-sent events"), a ``: heartbeat`` comment when idle, and ends with a
final comment when the client is too slow (GATEWAY_SSE_CLIENT_BUFFER) or the gateway shuts down; either way
the client reconnects and resumes with ``Last-Event-ID``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.requests import ClientDisconnect

from mailmesh.subscription.v1 import subscription_pb2 as sub_pb2
from services.gateway.convert import EVENT_TYPES, event_json
from services.gateway.errors import ApiError, UpstreamError, from_upstream
from services.gateway.fanout import FilterKey, SseClient, event_filter
from services.gateway.responses import Json, errors
from services.gateway.schemas import EventsPage
from services.gateway.state import GatewayState

__all__ = ["events_router", "filter_key"]

_MAX_SEQ = 2**63 - 1
_END_SHUTDOWN = b": the gateway is shutting down; reconnect with Last-Event-ID\n\n"
_END_SLOW = b": this client read too slowly and was dropped; reconnect with Last-Event-ID\n\n"
_HEARTBEAT = b": heartbeat\n\n"
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

Types = Annotated[
    str | None,
    Query(
        max_length=1024,
        description="Comma-separated event names: health:change, message:change, message:sent, "
        "message:error, message:received, message:stored (or the WAKU-API names message:send-propagated, "
        "message:send-error, "
        "health:connection-status). Omitted: every event.",
    ),
]
SubscriptionId = Annotated[
    str | None, Query(max_length=64, description="Only message events of records received on it.")
]
RequestId = Annotated[str | None, Query(max_length=64, description="Only message events of this request.")]


def filter_key(types: str | None, subscription_id: str | None, request_id: str | None) -> FilterKey:
    """The filter of a request's parameters; unknown event names are a 400."""
    numbers: set[int] = set()
    for name in (t.strip() for t in (types or "").split(",")):
        if not name:
            continue
        if name not in EVENT_TYPES:
            raise ApiError(400, f"types: unknown event '{name}'; known: {', '.join(EVENT_TYPES)}")
        numbers.add(EVENT_TYPES[name])
    return tuple(sorted(numbers)), subscription_id or "", request_id or ""


def events_router(state: GatewayState) -> APIRouter:
    """`GET /events` and `GET /events/stream`."""
    router = APIRouter(tags=["Events"])
    up = state.upstream

    @router.get(
        "/events",
        operation_id="pollEvents",
        summary="Events after a sequence, long polling",
        response_model=EventsPage,
        responses=errors(400, 410),
        description="The events after `after` (omitted: from now on), waiting up to `wait` seconds for the "
        "first; an empty page after the wait is normal. Pass `lastSequence` as the next `after`. "
        "410: `after` "
        "is older than the retained events (`oldest` says where they begin; resume with after=0 for "
        "everything retained).",
    )
    async def poll(
        request: Request,
        after: Annotated[
            int | None, Query(ge=0, le=_MAX_SEQ, description="Resume after this sequence.")
        ] = None,
        wait: Annotated[
            float | None, Query(ge=0, le=3600, description="Seconds to wait for an event.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="Most events per answer.")] = 100,
        types: Types = None,
        subscriptionId: SubscriptionId = None,  # noqa: N803
        requestId: RequestId = None,  # noqa: N803
    ) -> Json:
        flt = event_filter(filter_key(types, subscriptionId, requestId))
        polled = sub_pb2.PollEventsRequest(filter=flt, limit=limit)
        if after is not None:
            polled.after_sequence = after
        try:
            reply = await state.unless_stopping(up.poll_events(polled, state.wait_s(wait)), request)
        except UpstreamError as err:
            raise from_upstream(err) from err
        if reply is None:  # shutting down
            if after is None:
                raise ApiError(503, "the gateway is shutting down; retry", headers={"Retry-After": "1"})
            return Json({"events": [], "lastSequence": after})
        return Json({"events": [event_json(e) for e in reply.events], "lastSequence": reply.last_sequence})

    @router.get(
        "/events/stream",
        operation_id="streamEvents",
        summary="Events as Server-Sent Events",
        response_class=StreamingResponse,
        responses={
            200: {
                "description": "An endless text/event-stream: `id: <sequence>`, `event: <name>`, `data: <the "
                'event as GET /events returns it>`; `event: gap` with `data: {"after": n, "oldest": m}` '
                "when the resume point is past retention; `: heartbeat` comments when idle.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **errors(400),
        },
        description="Resumable: the browser's EventSource sends `Last-Event-ID` on reconnect; `after` does "
        "the same for a first connection. Omitted: from now on.",
    )
    async def stream(
        after: Annotated[
            int | None, Query(ge=0, le=_MAX_SEQ, description="Resume after this sequence.")
        ] = None,
        types: Types = None,
        subscriptionId: SubscriptionId = None,  # noqa: N803
        requestId: RequestId = None,  # noqa: N803
        last_event_id: Annotated[
            str | None,
            Header(alias="Last-Event-ID", description="Resume after this sequence (SSE reconnect)."),
        ] = None,
    ) -> StreamingResponse:
        key = filter_key(types, subscriptionId, requestId)
        resume = after
        if last_event_id is not None and last_event_id.strip():
            if not last_event_id.strip().isdigit():
                raise ApiError(400, "Last-Event-ID: must be an event sequence (a non-negative integer)")
            resume = int(last_event_id.strip())
        if state.stopping.is_set():
            raise ApiError(503, "the gateway is shutting down; retry", headers={"Retry-After": "1"})
        try:
            client, joined_at = await state.hub.attach(key)
        except UpstreamError as err:
            raise from_upstream(err) from err
        frames = _frames(state, key, resume, client, joined_at)
        return _SseResponse(frames, on_close=lambda: state.hub.detach(key, client))

    return router


class _SseResponse(StreamingResponse):
    """A text/event-stream response that releases its client however the stream ends.

    The client is attached before the response starts (so an upstream failure can still be a 503), and the
    frames generator cannot release it: when the client disconnects before the first byte, Starlette cancels
    the streaming task before it ever iterates the generator, and a generator never started runs no
    ``finally``. So the release is here, after the response whatever happened: the generator is closed (its
    catch-up read with it) and ``on_close`` detaches the client from its feed (the last one stops the
    upstream ``StreamEvents``).
    """

    def __init__(
        self, frames: AsyncGenerator[bytes, None], *, on_close: Callable[[], Awaitable[None]]
    ) -> None:
        super().__init__(frames, media_type="text/event-stream", headers=_SSE_HEADERS)
        self._frames = frames
        self._on_close = on_close

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Stream, then release the client (also when the stream never started)."""
        try:
            # ASGI 2.4 servers raise from send once the client is gone (Starlette: ClientDisconnect); the
            # stream simply ends, it is no error of ours.
            with contextlib.suppress(ClientDisconnect):
                await super().__call__(scope, receive, send)
        finally:
            try:
                await self._frames.aclose()
            finally:
                await self._on_close()


async def _frames(
    state: GatewayState, key: FilterKey, resume: int | None, client: SseClient, joined_at: int
) -> AsyncGenerator[bytes, None]:
    """The stream: catch up from ``resume``, then the client's queue, heartbeats, a final comment (the
    response detaches the client: :class:`_SseResponse`)."""
    last = joined_at if resume is None else resume
    yield b"retry: 1000\n\n"
    if last < joined_at:
        try:
            # aclosing: a client leaving mid catch-up ends the page read now, not when it is collected.
            async with contextlib.aclosing(state.hub.catch_up(key, last, joined_at)) as pages:
                async for frame in pages:
                    if frame.sequence == 0 or frame.sequence > last:
                        last = max(last, frame.sequence)
                        yield frame.data
        except UpstreamError:
            yield b": the event log is unavailable; reconnect with Last-Event-ID\n\n"
            return
    while True:
        batch = await client.take(state.cfg.sse_heartbeat_s)
        out = [f.data for f in batch if f.sequence == 0 or f.sequence > last]
        for frame in batch:
            last = max(last, frame.sequence)
        if out:
            yield b"".join(out)
        if client.closed:
            yield _END_SHUTDOWN
            return
        if client.dropped:
            yield _END_SLOW
            return
        if not batch:
            yield _HEARTBEAT
