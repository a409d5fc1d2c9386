"""The event source over REST: long polls (`GET /events`, `wait=` on `/messages` and `/health`) and
Server-Sent Events (`GET /events/stream`): order, resumption, gaps, filters, slow clients, shutdown."""

from __future__ import annotations

import asyncio

import httpx

from mailmesh.common.v1 import common_pb2
from services.gateway.fanout import Frame
from tests.integration.gateway.gateway_fakes import make_record
from tests.integration.gateway.gateway_support import GatewayHandle, SseItem, sse_items

GUID = "9978c4f1-4465-4537-9d95-0cf016fb1080"
WAIT_S = 30.0  # one bound per wait; the event ends it


def rec(
    seed: int, *, sending: bool = False, sent: bool = False, stored: bool = False, received: bool = False
) -> common_pb2.MessageRecord:
    rid = GUID if seed == 1 else ""
    return make_record(
        b"x",
        "/a/1/b/c",
        request_id=rid,
        seed=seed,
        sending=sending,
        sent=sent,
        stored=stored,
        received=received,
    )


async def test_a_long_poll_wakes_on_the_next_event_and_resumes_after_it(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    await subs.emit("message:change", rec(1, sending=True))
    poll = asyncio.create_task(gw.client.get("/events", params={"wait": WAIT_S}))
    while subs.waiting < 1:
        await asyncio.sleep(0.01)  # until the poll waits upstream (a state check, not a synchronisation)
    await subs.emit("message:sent", rec(1, sent=True))
    reply = await poll
    assert reply.status_code == 200
    page = reply.json()
    assert [e["event"] for e in page["events"]] == ["message:sent"]  # after the head: not the older one
    event = page["events"][0]
    assert event["sequence"] == 2 and page["lastSequence"] == 2
    assert event["wakuApiEvent"] == "message:send-propagated" and event["emittedAt"].endswith("Z")
    assert event["detail"]["sent"] is True and event["detail"]["requestId"] == GUID
    again = await gw.client.get("/events", params={"after": 0})
    assert [e["sequence"] for e in again.json()["events"]] == [1, 2]
    empty = await gw.client.get("/events", params={"after": 2, "wait": 0})
    assert empty.json() == {"events": [], "lastSequence": 2}


async def test_long_poll_filters_and_health_events(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    await subs.emit("message:change", rec(2))
    await subs.emit("health:change", health=common_pb2.HEALTH_STATUS_HEALTHY)
    await subs.emit("message:stored", rec(1, stored=True))
    reply = await gw.client.get("/events", params={"after": 0, "types": "health:change,message:stored"})
    events = reply.json()["events"]
    assert [e["event"] for e in events] == ["health:change", "message:stored"]
    health = events[0]
    assert (health["detail"], health["previous"], health["connectionStatus"]) == (
        "Healthy",
        "Unhealthy",
        "Connected",
    )
    reply = await gw.client.get("/events", params={"after": 0, "requestId": GUID})
    assert [e["event"] for e in reply.json()["events"]] == ["health:change", "message:stored"]
    # The WAKU-API spelling selects the same events.
    reply = await gw.client.get("/events", params={"after": 0, "types": "health:connection-status"})
    assert [e["event"] for e in reply.json()["events"]] == ["health:change"]
    reply = await gw.client.get("/events", params={"types": "message:bogus"})
    assert reply.status_code == 400 and reply.json()["error"].startswith(
        "types: unknown event 'message:bogus'"
    )


async def test_a_resume_point_past_retention_is_410_with_the_oldest(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    for seed in range(1, 6):
        await subs.emit("message:change", rec(seed))
    subs.expire_before(4)
    reply = await gw.client.get("/events", params={"after": 1})
    assert reply.status_code == 410
    assert reply.json() == {
        "error": "sequence 1 is older than the retained events; the oldest retained is 4",
        "oldest": 4,
    }
    assert [
        e["sequence"] for e in (await gw.client.get("/events", params={"after": 0})).json()["events"]
    ] == [4, 5]


async def read_until(stream: object, want: int, *, comments: bool = False) -> list[SseItem]:
    """SSE items until ``want`` events (not comments) were read."""
    items: list[SseItem] = []
    async with asyncio.timeout(WAIT_S):
        async for item in stream:  # type: ignore[attr-defined]
            if item.event is not None or (comments and item.comment is not None):
                items.append(item)
            if sum(i.event is not None for i in items) >= want:
                return items
    return items


async def test_sse_streams_events_in_order_and_a_resumed_stream_misses_nothing(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    await subs.emit("message:change", rec(1, sending=True))  # before: not on a stream without a resume point
    async with gw.client.stream("GET", "/events/stream") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        items = sse_items(response)
        first = await anext(items)
        assert first.retry == 1000
        await subs.emit("message:sent", rec(1, sent=True))
        await subs.emit("message:change", rec(1, sent=True))
        got = await read_until(items, 2)
    assert [(i.id, i.event) for i in got] == [("2", "message:sent"), ("3", "message:change")]
    assert got[0].json()["detail"]["sent"] is True and got[0].json()["sequence"] == 2

    # Disconnected after 2; 3..5 happen meanwhile; Last-Event-ID resumes after 2.
    await subs.emit("message:stored", rec(1, stored=True))
    await subs.emit("message:change", rec(1, stored=True))
    async with gw.client.stream("GET", "/events/stream", headers={"Last-Event-ID": "2"}) as response:
        items = sse_items(response)
        got = await read_until(items, 3)
        await subs.emit("message:received", rec(2, received=True))
        got += await read_until(items, 1)
    assert [int(i.id or 0) for i in got] == [3, 4, 5, 6]
    assert [i.event for i in got] == [
        "message:change",
        "message:stored",
        "message:change",
        "message:received",
    ]


async def test_sse_with_after_and_a_gap_past_retention(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    for seed in range(1, 6):
        await subs.emit("message:change", rec(seed))
    subs.expire_before(4)
    async with gw.client.stream("GET", "/events/stream", params={"after": 1}) as response:
        got = await read_until(sse_items(response), 3)
    assert got[0].event == "gap" and got[0].id is None and got[0].json() == {"after": 1, "oldest": 4}
    assert [i.id for i in got[1:]] == ["4", "5"]


async def test_sse_clients_with_one_filter_share_one_upstream_stream(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    async with (
        gw.client.stream("GET", "/events/stream", params={"types": "message:sent"}) as a,
        gw.client.stream("GET", "/events/stream", params={"types": "message:sent"}) as b,
    ):
        ia, ib = sse_items(a), sse_items(b)
        await anext(ia)
        await anext(ib)
        assert gw.metric("mailmesh_gateway_sse_clients") == 2
        await subs.emit("message:change", rec(1))
        await subs.emit("message:sent", rec(1, sent=True))
        got_a, got_b = await read_until(ia, 1), await read_until(ib, 1)
    assert [i.id for i in got_a] == [i.id for i in got_b] == ["2"]
    assert len(subs.stream_calls) == 1
    assert list(subs.stream_calls[0].filter.types) == [3]  # EVENT_TYPE_MESSAGE_SENT


async def test_sse_heartbeats_while_idle(make_gateway: object) -> None:
    gw: GatewayHandle = await make_gateway(GATEWAY_SSE_HEARTBEAT_SECONDS="0.05")  # type: ignore[operator]
    async with gw.client.stream("GET", "/events/stream") as response:
        items = sse_items(response)
        await anext(items)
        assert (await anext(items)).comment == "heartbeat"


async def test_a_slow_sse_client_is_dropped_with_a_final_comment(make_gateway: object) -> None:
    gw: GatewayHandle = await make_gateway(GATEWAY_SSE_CLIENT_BUFFER="2")  # type: ignore[operator]
    subs = gw.fakes.subscription
    async with gw.client.stream("GET", "/events/stream") as response:
        items = sse_items(response)
        await anext(items)
        (feed,) = gw.deps.state.hub.feeds
        (client,) = feed.clients
        for seed in range(1, 5):  # the client reads nothing meanwhile: its buffer of 2 overflows
            client.offer(Frame(seed, b"id: x\n\n"))
        assert client.dropped
        rest = [i async for i in items]
    assert rest[-1].comment is not None and "too slowly" in rest[-1].comment
    await subs.emit("message:change", rec(1))  # the feed goes on without it
    assert gw.metric("mailmesh_gateway_sse_clients") == 0


async def test_shutdown_ends_sse_streams_and_answers_long_polls(make_gateway: object) -> None:
    gw: GatewayHandle = await make_gateway()  # type: ignore[operator]
    client = httpx.AsyncClient(base_url=gw.url, timeout=30)
    try:
        async with client.stream("GET", "/events/stream") as response:
            items = sse_items(response)
            await anext(items)
            poll = asyncio.create_task(client.get("/events", params={"after": 0, "wait": WAIT_S}))
            while gw.metric("mailmesh_gateway_http_requests_in_flight") < 2:
                await asyncio.sleep(0.01)  # until the poll is in flight (a state check)
            stopping = asyncio.create_task(gw.mesh.stop(5))
            rest = [i async for i in items]
            reply = await poll
            await stopping
        assert rest[-1].comment is not None and "shutting down" in rest[-1].comment
        assert (reply.status_code, reply.json()) == (200, {"events": [], "lastSequence": 0})
    finally:
        await client.aclose()


async def test_messages_wait_answers_when_a_record_arrives(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    sid = "1692854c-cbde-4afe-901f-1c86ecbd9ea1"
    params: dict[str, str | float] = {"subscriptionId": sid, "wait": WAIT_S}
    poll = asyncio.create_task(gw.client.get("/messages", params=params))
    while subs.waiting < 1:
        await asyncio.sleep(0.01)  # until the poll waits upstream (a state check)
    await subs.add_record(make_record(b"other", "/a/1/b/c", seed=9))  # not on the subscription: no answer yet
    await subs.add_record(make_record(b"mine", "/a/1/b/c", seed=1, received=True, subscription_ids=(sid,)))
    reply = await poll
    assert reply.status_code == 200 and [r["message"]["payload"] for r in reply.json()] == ["bWluZQ=="]
    # A bounded wait that finds nothing is still the spec's 404.
    reply = await gw.client.get("/messages", params={"contentTopic": "/q/1/r/s", "wait": 0.05})
    assert (reply.status_code, reply.json()) == (
        404,
        {"error": "No messages found for contentTopic '/q/1/r/s'"},
    )


async def test_health_wait_answers_on_a_status_change(gw: GatewayHandle) -> None:
    health = gw.fakes.health
    # Known status differs from the current one: at once.
    reply = await gw.client.get("/health", params={"wait": WAIT_S, "status": "Healthy"})
    assert reply.json()["status"] == "MinimallyHealthy"
    poll = asyncio.create_task(gw.client.get("/health", params={"wait": WAIT_S}))
    while health.watch_calls < 2:
        await asyncio.sleep(0.01)  # until the second watch is open (a state check)
    await health.set_status(common_pb2.HEALTH_STATUS_HEALTHY)
    reply = await poll
    assert reply.json() == {"status": "Healthy", "connectionStatus": "Connected"}
    reply = await gw.client.get("/health", params={"wait": 0.05})  # nothing changes: the current status
    assert reply.json()["status"] == "Healthy"
    async with asyncio.timeout(WAIT_S):
        while health.watchers:  # every watch the gateway opened is closed once answered
            await asyncio.sleep(0.01)
