"""The `mailmesh` CLI's gateway commands (send, subscribe, messages, watch) against a running gateway."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from typing import Any

from mailmeshcli.cli import main
from tests.integration.gateway.gateway_fakes import make_record
from tests.integration.gateway.gateway_support import AUTH_ENV, CLIENT_TOKEN, GatewayHandle

TOPIC = "/waku/1/0x01020304/rfc26"


async def cli(*argv: str) -> tuple[int, list[Any]]:
    """Run the CLI in a thread (it blocks on HTTP to the gateway running on this loop)."""
    out = io.StringIO()
    code = await asyncio.to_thread(main, list(argv), out)
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


async def test_send_subscribe_and_messages(gw: GatewayHandle) -> None:
    code, lines = await cli(
        "send",
        "--gateway",
        gw.url,
        "--content-topic",
        TOPIC,
        "--text",
        "hi",
        "--count",
        "2",
        "--meta-hex",
        "0x6d",
        "--ephemeral",
    )
    assert code == 0 and [list(line) for line in lines] == [["requestId"], ["requestId"]]
    request = gw.fakes.send.requests[0]
    assert (request.message.payload, request.message.meta, request.message.ephemeral) == (b"hi", b"m", True)
    code, lines = await cli("subscribe", "--gateway", gw.url, "--content-topic", TOPIC)
    assert code == 0 and lines == [{"subscriptionId": gw.fakes.subscription.subscriptions[0]}]
    code, lines = await cli("messages", "--gateway", gw.url, "--content-topic", TOPIC)
    assert (code, lines) == (0, [])  # the spec's 404 for an empty listing is no lines
    await gw.fakes.subscription.add_record(make_record(b"x", TOPIC, received=True))
    code, lines = await cli("messages", "--gateway", gw.url, "--content-topic", TOPIC, "--take", "5")
    assert code == 0 and [base64.b64decode(r["message"]["payload"]) for r in lines] == [b"x"]


async def test_errors_are_a_json_line_and_exit_1(make_gateway: Any) -> None:
    gw: GatewayHandle = await make_gateway(**AUTH_ENV)
    code, lines = await cli("send", "--gateway", gw.url, "--content-topic", TOPIC, "--text", "x")
    assert (code, lines) == (
        1,
        [{"error": "missing bearer token (Authorization: Bearer <token>)", "status": 401}],
    )
    code, lines = await cli(
        "send",
        "--gateway",
        gw.url,
        "--token",
        CLIENT_TOKEN,
        "--pubsub-topic",
        "nope",
        "--content-topic",
        TOPIC,
        "--text",
        "x",
    )
    assert (code, lines) == (
        1,
        [{"error": "Failed to send message. Target pubsubTopic 'nope' not supported.", "status": 404}],
    )
    code, lines = await cli(
        "subscribe", "--gateway", "http://127.0.0.1:9", "--content-topic", TOPIC, "--timeout", "2"
    )
    assert code == 1 and lines[0]["error"].startswith("ConnectError")


async def test_watch_prints_events_as_json_lines_from_a_resume_point(gw: GatewayHandle) -> None:
    subs = gw.fakes.subscription
    for seed in (1, 2):
        await subs.emit("message:change", make_record(b"x", TOPIC, seed=seed))
    watching = asyncio.create_task(cli("watch", "--gateway", gw.url, "--after", "0", "--count", "3"))
    while not subs.stream_calls:
        await asyncio.sleep(0.01)  # until the gateway follows the event log (a state check)
    await subs.emit("message:sent", make_record(b"x", TOPIC, seed=1, sent=True))
    code, lines = await watching
    assert code == 0
    assert [(e["sequence"], e["event"]) for e in lines] == [
        (1, "message:change"),
        (2, "message:change"),
        (3, "message:sent"),
    ]
