"""The Messaging API's REST endpoints, as MESSAGING-API's REST sections write them: Send (`POST /send`,
`POST /send/cancel`, `GET /send/requests`), Subscribe (`POST /subscribe`, `POST /unsubscribe`,
`GET /subscriptions`), Message Storage (`GET /message`, `GET /messages`) and Health (`GET /health`).

Each handler translates: JSON in, one gRPC call (two for a long poll), JSON out; errors go through
:func:`~.errors.from_upstream`. Long polling (MESSAGING-API "Event source": "long polling over the Message
Store API SHOULD be used") is ``wait=<seconds>`` on `GET /messages` (answer once the page is not empty) and
`GET /health` (answer once the status differs from ``status=``, or from the current one).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2
from mailmesh.subscription.v1 import subscription_pb2 as sub_pb2
from services.gateway.convert import health_json, parse_hash, record_json
from services.gateway.errors import ApiError, UpstreamError, from_upstream
from services.gateway.jsonroute import JsonBodyRoute
from services.gateway.responses import Json, errors
from services.gateway.schemas import (
    CancelBody,
    HealthBody,
    HealthStatus,
    RecordBody,
    RequestIdBody,
    SendFields,
    StatusOk,
    SubscribeBody,
    SubscriptionIdBody,
    UnsubscribeBody,
    send_body,
)
from services.gateway.state import GatewayState

__all__ = ["api_router"]

_OK = {"status": "ok"}
_U32 = 2**32 - 1
Wait = Annotated[
    float | None,
    Query(
        ge=0,
        le=3600,
        description="Long poll: wait up to this many seconds (at most GATEWAY_MAX_WAIT_SECONDS) for an "
        "answer "
        "that differs from the immediate one (see the operation).",
    ),
]


def _not_evaluated() -> ApiError:
    return ApiError(503, "node health is not evaluated yet; retry", headers={"Retry-After": "1"})


def api_router(state: GatewayState) -> APIRouter:
    """The Send, Subscribe, Message Storage and Health endpoints over ``state``'s upstream services."""
    # JsonBodyRoute: the POST bodies (send, cancel, subscribe, unsubscribe) are parsed by their models'
    # model_validate_json when valid; everything else is FastAPI's handling as usual.
    router = APIRouter(route_class=JsonBodyRoute)
    up = state.upstream

    async def call(work: Any, *, not_found: str | None = None) -> Any:
        try:
            return await work
        except UpstreamError as err:
            raise from_upstream(err, not_found=not_found) from err

    # ------------------------------------------------------------------------------------------ send

    async def send(body: SendFields) -> Json:
        message = common_pb2.WakuMessage(
            payload=base64.b64decode(body.payload), content_topic=body.contentTopic
        )
        if body.meta is not None:
            message.meta = base64.b64decode(body.meta)
        if body.timestamp:
            message.timestamp = body.timestamp
        if body.ephemeral:
            message.ephemeral = True
        request = send_pb2.SendRequest(pubsub_topic=body.pubsubTopic, message=message)
        reply = await call(up.send_message(request))
        return Json({"requestId": reply.request_id})

    # FastAPI validates against the annotation: the model bounded by this node's max payload.
    send.__annotations__["body"] = send_body(state.cfg.max_payload_bytes)
    router.post(
        "/send",
        operation_id="send",
        tags=["Send"],
        summary="Send a message (MESSAGING-API send)",
        response_model=RequestIdBody,
        responses=errors(400, 404, 413),
        description="Schedules the message and returns its RequestID before any network I/O; the send "
        "service publishes it through the edge peers and retries (1 s, 2 s, 4 s). 404: the pubsub topic is "
        "not served (`Failed to send message. Target pubsubTopic '<topic>' not supported.`).",
    )(send)

    @router.post(
        "/send/cancel",
        operation_id="cancelRequest",
        tags=["Send"],
        summary="Cancel a pending send (MESSAGING-API cancelRequest)",
        response_model=StatusOk,
        responses=errors(400, 409, 413),
        description="Stops a pending request; ignored (still 200) when it already finished or is unknown. "
        "409: another send replica owns the request (retry).",
    )
    async def cancel(body: CancelBody) -> Json:
        await call(up.cancel(body.requestId))
        return Json(_OK)

    @router.get(
        "/send/requests",
        operation_id="getPendingRequests",
        tags=["Send"],
        summary="Pending requests (MESSAGING-API getPendingRequests)",
        response_model=list[str],
        responses=errors(),
        description="RequestIDs of the requests not yet finished, without duplicates, in serving order.",
    )
    async def pending() -> Json:
        return Json(await call(up.pending()))

    # ------------------------------------------------------------------------------------------ subscribe

    @router.post(
        "/subscribe",
        operation_id="subscribe",
        tags=["Subscribe"],
        summary="Subscribe to a content topic (MESSAGING-API subscribe)",
        response_model=SubscriptionIdBody,
        responses=errors(400, 404, 413),
        description="Starts receiving messages on the content topic; read them with "
        "`GET /messages?subscriptionId=`. 404: the pubsub topic's cluster is not served (`Cannot create "
        "subscription. clusterId <n> is not supported.`).",
    )
    async def subscribe(body: SubscribeBody) -> Json:
        subscription_id = await call(up.subscribe(body.pubsubTopic, body.contentTopic))
        return Json({"subscriptionId": subscription_id})

    @router.post(
        "/unsubscribe",
        operation_id="unsubscribe",
        tags=["Subscribe"],
        summary="Stop a subscription (MESSAGING-API unsubscribe)",
        response_model=StatusOk,
        responses=errors(400, 413),
        description="Ignored (still 200) for an unknown subscription.",
    )
    async def unsubscribe(body: UnsubscribeBody) -> Json:
        await call(up.unsubscribe(body.subscriptionId))
        return Json(_OK)

    @router.get(
        "/subscriptions",
        operation_id="getActiveSubscriptions",
        tags=["Subscribe"],
        summary="Active subscriptions (MESSAGING-API getActiveSubscriptions)",
        response_model=list[str],
        responses=errors(),
    )
    async def subscriptions() -> Json:
        return Json(await call(up.subscriptions()))

    # ------------------------------------------------------------------------------------------ storage

    @router.get(
        "/message",
        operation_id="getMessage",
        tags=["Message Storage"],
        summary="One message record by requestId or hash (MESSAGING-API getByRequestId, getByHash)",
        response_model=RecordBody,
        responses=errors(400, 404),
        description="Give exactly one of `requestId` and `hash` (0x-prefixed hex; the prefix is optional). "
        "404 `Message with requestId '<id>' not found` / `Message with hash '<hash>' not found`, also for "
        "an id or hash that is malformed (the spec: an invalid one returns nothing).",
    )
    async def message(
        requestId: Annotated[str | None, Query(description="A Send API RequestID.")] = None,  # noqa: N803
        hash: Annotated[str | None, Query(description="A 14/WAKU2 message hash, hex.")] = None,
    ) -> Json:
        if (requestId is None) == (hash is None):
            raise ApiError(400, "give exactly one of requestId or hash")
        if requestId is not None:
            request = sub_pb2.GetMessageRecordRequest(request_id=requestId)
            not_found = f"Message with requestId '{requestId}' not found"
        else:
            assert hash is not None
            not_found = f"Message with hash '{hash}' not found"
            digest = parse_hash(hash)
            if digest is None:
                raise ApiError(404, not_found)
            request = sub_pb2.GetMessageRecordRequest(message_hash=digest)
        return Json(record_json(await call(up.record(request), not_found=not_found)))

    @router.get(
        "/messages",
        operation_id="getMessages",
        tags=["Message Storage"],
        summary="Message records by contentTopic or subscriptionId (MESSAGING-API getByContentTopic, "
        "getBySubscriptionId)",
        response_model=list[RecordBody],
        responses=errors(400, 404),
        description="Give exactly one of `contentTopic` and `subscriptionId`. Records in arrival order; "
        "`skip` passes over the first ones, `take` bounds the count (both omitted: all). An empty result is "
        "the spec's 404 `No messages found for contentTopic '<t>'` / `No messages found for subscriptionId "
        "'<id>'`. With `wait`, an empty page is a long poll: the answer comes as soon as a record arrives "
        "past `skip` (or the wait ends: then the 404).",
    )
    async def messages(
        request: Request,
        contentTopic: Annotated[str | None, Query(max_length=1024)] = None,  # noqa: N803
        subscriptionId: Annotated[str | None, Query(max_length=64)] = None,  # noqa: N803
        skip: Annotated[int | None, Query(ge=0, le=_U32, description="Records to pass over first.")] = None,
        take: Annotated[int | None, Query(ge=0, le=_U32, description="Most records to return.")] = None,
        wait: Wait = None,
    ) -> Json:
        if (contentTopic is None) == (subscriptionId is None):
            raise ApiError(400, "give exactly one of contentTopic or subscriptionId")
        flt = sub_pb2.RecordFilter(content_topic=contentTopic or "", subscription_id=subscriptionId or "")
        listing = sub_pb2.ListMessageRecordsRequest(filter=flt)
        if skip is not None:
            listing.skip = skip
        if take is not None:
            listing.take = take
        left = state.wait_s(wait) if take != 0 else 0.0
        # A long poll learns the records' head revision before listing, so nothing that arrives in between
        # is missed.
        head = (
            await call(up.poll_records(sub_pb2.PollRecordsRequest(filter=flt, limit=1), 0.0))
            if left
            else None
        )
        found = await call(up.records(listing))
        if not found and head is not None:
            found = await _wait_for_records(state, listing, head.last_revision, left, request)
        if not found:
            what = (
                f"contentTopic '{contentTopic}'"
                if contentTopic is not None
                else f"subscriptionId '{subscriptionId}'"
            )
            raise ApiError(404, f"No messages found for {what}")
        return Json([record_json(r) for r in found])

    # ------------------------------------------------------------------------------------------ health

    @router.get(
        "/health",
        operation_id="getHealth",
        tags=["Health"],
        summary="Node health (MESSAGING-API Health Indicator)",
        response_model=HealthBody,
        responses=errors(400),
        description='`{"status": "Unhealthy" | "MinimallyHealthy" | "Healthy"}` plus the same state as '
        "WAKU-API's `connectionStatus`. With `wait`, a long poll: the answer comes when the status differs "
        "from `status` (default: the current one) or the wait ends (then the current status).",
    )
    async def health(
        request: Request,
        wait: Wait = None,
        status: Annotated[HealthStatus | None, Query(description="The status the client knows.")] = None,
    ) -> Json:
        left = state.wait_s(wait)
        if left <= 0:
            report = await call(up.health_report())
            if report.status not in (1, 2, 3):
                raise _not_evaluated()
            return Json(health_json(report))
        latest = await state.unless_stopping(_watch_health(state, status, left), request)
        if latest is None:  # shutting down: answer with what is true now
            latest = await call(up.health_report())
        if latest.status not in (1, 2, 3):
            raise _not_evaluated()
        return Json(health_json(latest))

    return router


async def _wait_for_records(
    state: GatewayState,
    listing: sub_pb2.ListMessageRecordsRequest,
    after: int,
    wait_s: float,
    request: Request,
) -> list[Any]:
    """Wait up to ``wait_s`` for ``listing`` to find something: PollRecords wakes us on every change of a
    matching record, then the listing is read again. The wait ends early when ``request``'s client leaves."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    poll = sub_pb2.PollRecordsRequest(filter=listing.filter, limit=1, after_revision=after)
    while (left := deadline - loop.time()) > 0:
        try:
            reply = await state.unless_stopping(state.upstream.poll_records(poll, left), request)
        except UpstreamError as err:
            raise from_upstream(err) from err
        if reply is None:  # shutting down
            return []
        poll.after_revision = reply.last_revision
        if reply.records:
            try:
                found = await state.upstream.records(listing)
            except UpstreamError as err:
                raise from_upstream(err) from err
            if found:
                return found
    return []


async def _watch_health(state: GatewayState, known: str | None, wait_s: float) -> Any:
    """The first report whose status differs from ``known`` (None: from the first report's), or the latest
    one when ``wait_s`` runs out."""
    names = {1: "Unhealthy", 2: "MinimallyHealthy", 3: "Healthy"}
    latest: Any = None
    try:
        with contextlib.suppress(TimeoutError):
            async with (
                asyncio.timeout(wait_s),
                contextlib.aclosing(state.upstream.health_watch(wait_s)) as watch,
            ):
                async for reply in watch:
                    report = reply.report
                    if latest is None:
                        latest = report
                        known = known if known is not None else names.get(report.status)
                    else:
                        latest = report
                    if names.get(report.status) != known:
                        return report
    except UpstreamError as err:
        raise from_upstream(err) from err
    return latest if latest is not None else await state.upstream.health_report()
