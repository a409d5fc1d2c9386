"""Clients that leave: an SSE stream or a long poll abandoned at any point releases everything it held — the
per-client queue, the fan-out feed and its upstream StreamEvents, the upstream PollEvents / PollRecords /
WatchHealth call — promptly, not at the end of the wait (or never).

Each client is a raw TCP connection that sends its request and closes, so nothing (no HTTP client library)
waits politely for a first byte. Releases are awaited by polling the gateway's and the fakes' state with a
bound far below the waits the requests asked for.

What failed before the fix: every abandoned long poll held its upstream call for the whole wait (uvicorn
does not cancel a request's task when its client leaves), and a stream whose first ``send`` raised (ASGI 2.4
servers) kept its client attached for ever, since its frames generator never started. Under uvicorn (ASGI
2.3) a stream left before its first byte was already released — Starlette's task group starts the
streaming task, sends to a gone client return at once, and the cancellation lands inside the generator's
first wait — and those tests stay as guards of that.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, MutableMapping
from typing import Any

import pytest

from services.gateway.app import build_app
from tests.integration.gateway.gateway_fakes import make_record
from tests.integration.gateway.gateway_support import GatewayHandle

BOUND_S = 20.0  # each release is awaited this long at most; the long polls ask for 60 s
WAIT_S = 60


async def request_and_leave(gw: GatewayHandle, target: str, *, read_until: bytes | None = None) -> None:
    """Send ``GET target`` on a raw connection, read up to ``read_until`` (if given), then close at once."""
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.http.port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    if read_until is not None:
        async with asyncio.timeout(BOUND_S):
            await reader.readuntil(read_until)
    writer.close()
    await writer.wait_closed()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (gateway and fake state, both in this event loop) for at most BOUND_S."""
    try:
        async with asyncio.timeout(BOUND_S):
            while not condition():
                await asyncio.sleep(0.01)  # polling a state, not ordering events
    except TimeoutError:
        raise AssertionError(f"not within {BOUND_S} s: {what}") from None


def answered(gw: GatewayHandle, route: str) -> float:
    """How many requests of ``route`` the gateway finished, whatever their status."""
    return sum(
        sample.value
        for metric in gw.registry.collect()
        if metric.name == "mailmesh_gateway_http_requests"
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels.get("route") == route
    )


def released_sse(gw: GatewayHandle) -> bool:
    hub = gw.deps.state.hub
    return (
        gw.metric("mailmesh_gateway_sse_clients") == 0
        and not tuple(hub.feeds)
        and gw.fakes.subscription.streaming == 0
        and gw.metric("mailmesh_gateway_http_requests_in_flight") == 0
    )


@pytest.mark.parametrize("clients", [1, 8])
async def test_sse_clients_leaving_before_the_first_byte_are_released(
    gw: GatewayHandle, clients: int
) -> None:
    """The gateway learns of the disconnect while it attaches the client (its first PollEvents is held), so
    the response starts for a client already gone."""
    subs = gw.fakes.subscription
    subs.poll_gate.clear()
    await asyncio.gather(*(request_and_leave(gw, "/events/stream") for _ in range(clients)))
    await until(lambda: subs.polls_held >= 1, "the first attach asks for the head")
    await until(lambda: gw.http.connections == 0, "the gateway saw every client leave")
    subs.poll_gate.set()
    # Every request reached the app and ended (or the test would prove nothing) ...
    await until(lambda: answered(gw, "/events/stream") == clients, "every stream request finished")
    # ... and left nothing behind.
    await until(lambda: released_sse(gw), "the SSE clients, their feed and its upstream stream released")


async def test_a_stream_whose_first_send_fails_releases_its_client(
    gw: GatewayHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """ASGI 2.4 servers raise OSError from ``send`` once the client is gone (ASGI HTTP spec, "Disconnected
    Client - send exception"), and Starlette then never iterates the frames: the client was attached for a
    stream that never started. Driven through the app itself, as such a server would."""
    app = build_app(gw.deps.state, None)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/events/stream",
        "raw_path": b"/events/stream",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", gw.http.port),
    }
    sent: list[str] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(str(message["type"]))
        raise OSError("the client closed the connection")

    with caplog.at_level(logging.DEBUG):
        await app(scope, receive, send)  # returns: a client leaving is no error
    assert sent == ["http.response.start"]  # the stream was attached and its response begun
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    await until(lambda: released_sse(gw), "the SSE client, its feed and its upstream stream released")


async def test_sse_clients_leaving_at_once_are_released(gw: GatewayHandle) -> None:
    await asyncio.gather(*(request_and_leave(gw, "/events/stream") for _ in range(8)))
    await until(lambda: answered(gw, "/events/stream") == 8, "every stream request finished")
    await until(lambda: released_sse(gw), "the SSE clients, their feed and its upstream stream released")


async def test_sse_clients_leaving_mid_stream_are_released(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    for seed in range(1, 4):
        await subs.emit("message:change", make_record(bytes([seed]), "/a/1/b/c", seed=seed))
    await request_and_leave(gw, "/events/stream", read_until=b"\n\n")  # after `retry:`, waiting for events
    await request_and_leave(gw, "/events/stream?after=0", read_until=b"id: 1\n")  # resumed: replaying
    await until(lambda: answered(gw, "/events/stream") == 2, "both stream requests finished")
    await until(lambda: released_sse(gw), "the SSE clients, their feed and its upstream stream released")


@pytest.mark.parametrize(
    ("target", "route"),
    [
        (f"/events?after=0&wait={WAIT_S}", "/events"),
        (f"/messages?contentTopic=/a/1/b/c&wait={WAIT_S}", "/messages"),
    ],
)
async def test_a_long_poll_abandoned_mid_wait_cancels_its_upstream_wait(
    gw: GatewayHandle, target: str, route: str
) -> None:
    subs = gw.fakes.subscription
    _, writer = await asyncio.open_connection("127.0.0.1", gw.http.port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    await until(lambda: subs.waiting == 1, "the long poll waits upstream")
    writer.close()
    await writer.wait_closed()
    await until(lambda: subs.waiting == 0, "the upstream wait cancelled")
    await until(lambda: answered(gw, route) == 1, "the request finished")
    assert gw.metric("mailmesh_gateway_http_requests_total", route=route, method="GET", code="499") == 1
    assert gw.metric("mailmesh_gateway_http_requests_in_flight") == 0


async def test_a_health_long_poll_abandoned_mid_wait_closes_its_watch(gw: GatewayHandle) -> None:
    health = gw.fakes.health
    _, writer = await asyncio.open_connection("127.0.0.1", gw.http.port)
    writer.write(f"GET /health?wait={WAIT_S} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    await until(lambda: health.watchers == 1, "the health long poll watches upstream")
    writer.close()
    await writer.wait_closed()
    await until(lambda: health.watchers == 0, "the upstream WatchHealth closed")
    await until(lambda: answered(gw, "/health") == 1, "the request finished")
    assert gw.metric("mailmesh_gateway_http_requests_total", route="/health", method="GET", code="499") == 1
