"""The Messaging API through REST against the running mesh with a real wakunode RLPx peer (MESSAGING-API
REST sections): a sent message reaches the peer and its record goes sending → sent → stored, with the
events seen in order over long polling and over SSE; a peer's message is received on a subscription; a
resumed SSE stream misses nothing; the spec's 404s; malformed requests are 400s. Waits are event-driven
(long polls, streams)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.e2e.gateway.conftest import CONFIRMED, GatewayMesh
from tests.integration.edge_peer.edge_peer_support import envelopes, relay_client
from wakunode.memory import MemorySink

WAIT_S = 60.0
TOPIC = b"\x0e\x0f\x10\x13"  # CONFIRMED's Waku v1 topic


async def sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The events of an SSE response (id, event, data parsed), comments skipped."""
    block: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if "event" in block:
                yield block
            block = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            block[name] = json.loads(value) if name == "data" else value


async def poll_until(
    client: httpx.AsyncClient, after: int, rid: str, last: str
) -> tuple[list[dict[str, Any]], int]:
    """Long-poll `GET /events` for one request's events until one named ``last``."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(WAIT_S):
        while True:
            reply = await client.get("/events", params={"after": after, "wait": 10, "requestId": rid})
            assert reply.status_code == 200, reply.text
            page = reply.json()
            seen += page["events"]
            after = page["lastSequence"]
            if any(e["event"] == last for e in page["events"]):
                return seen, after


async def test_send_sent_stored_over_long_poll_and_sse_then_received_and_resumed(
    gateway_mesh: GatewayMesh,
) -> None:
    sink = MemorySink()
    peer = relay_client(sink)
    await peer.start()
    try:
        info = await peer.connect(gateway_mesh.enode)
        async with httpx.AsyncClient(base_url=gateway_mesh.url, timeout=WAIT_S + 10) as client:
            async with asyncio.timeout(WAIT_S):  # the one peer makes the node MinimallyHealthy (and Healthy)
                status = (await client.get("/health")).json()["status"]
                while status == "Unhealthy":
                    status = (await client.get("/health", params={"wait": 10, "status": status})).json()[
                        "status"
                    ]
            head = (await client.get("/events", params={"wait": 0})).json()["lastSequence"]
            async with client.stream("GET", "/events/stream", params={"after": head}) as stream:
                events = sse(stream)
                payload = base64.b64encode(b"through the gateway").decode()
                reply = await client.post("/send", json={"contentTopic": CONFIRMED, "payload": payload})
                assert reply.status_code == 200, reply.text
                rid = reply.json()["requestId"]

                polled, _ = await poll_until(client, head, rid, "message:stored")
                names = [e["event"] for e in polled]
                assert names.index("message:sent") < names.index("message:stored")
                for name in ("message:sent", "message:stored"):
                    assert names[names.index(name) + 1] == "message:change", names
                sequences = [e["sequence"] for e in polled]
                assert sequences == sorted(set(sequences))

                streamed: list[dict[str, Any]] = []
                async with asyncio.timeout(WAIT_S):
                    async for event in events:
                        if (
                            event["data"]["event"].startswith("message:")
                            and event["data"]["detail"].get("requestId") == rid
                        ):
                            streamed.append(event)
                            if event["event"] == "message:stored":
                                break
                # The stream has the same events in the same order, with ids = sequences. Compared over the
                # request's message events, what `streamed` kept: a health:change passes the requestId filter
                # too (the node's health may change meanwhile, e.g. as other tests' peers come and go).
                assert [(int(e["id"]), e["event"]) for e in streamed] == [
                    (e["sequence"], e["event"])
                    for e in polled
                    if e["event"].startswith("message:") and e["sequence"] <= int(streamed[-1]["id"])
                ]
                last_id = streamed[-1]["id"]

            record = (await client.get("/message", params={"requestId": rid})).json()
            assert (record["sending"], record["sent"], record["stored"]) == (False, True, True)
            assert record["message"] == {
                "payload": payload,
                "contentTopic": CONFIRMED,
                "timestamp": record["message"]["timestamp"],
            }
            (relayed,) = [e for e in await sink.wait_for(1, timeout=WAIT_S) if e.topic == TOPIC]
            assert relayed.data == b"through the gateway"
            # `stored` can reach the record before the send service has saved the request as finished: the
            # history-query result of the send service's own store check is also seen by the subscription
            # service (WatchServed), which marks the record stored a moment before the send service commits
            # SUCCEEDED. The request leaves the pending list then (bounded).
            async with asyncio.timeout(WAIT_S):
                while rid in (await client.get("/send/requests")).json():
                    await asyncio.sleep(0.05)  # polling the outbox's state, bounded

            # A subscription receives what the peer posts; read it over /messages?wait.
            sub = await client.post("/subscribe", json={"contentTopic": CONFIRMED})
            assert sub.status_code == 200, sub.text
            sid = sub.json()["subscriptionId"]
            assert sid in (await client.get("/subscriptions")).json()
            waiting = asyncio.create_task(
                client.get("/messages", params={"subscriptionId": sid, "wait": WAIT_S})
            )
            (posted,) = envelopes(1, topic=TOPIC, first=11)
            await peer.post(info.pubkey, [posted])
            received = await waiting
            assert received.status_code == 200, received.text
            (message,) = received.json()
            assert message["received"] is True and "requestId" not in message
            assert base64.b64decode(message["message"]["payload"]) == posted.data

            # The stream resumed after the last id it gave misses nothing that happened meanwhile.
            async with client.stream("GET", "/events/stream", headers={"Last-Event-ID": last_id}) as stream:
                resumed: list[dict[str, Any]] = []
                async with asyncio.timeout(WAIT_S):
                    async for event in sse(stream):
                        resumed.append(event)
                        if event["event"] == "message:received":
                            break
            everything = (await client.get("/events", params={"after": last_id, "limit": 1000})).json()[
                "events"
            ]
            upto = int(resumed[-1]["id"])
            assert [int(e["id"]) for e in resumed] == [
                e["sequence"] for e in everything if e["sequence"] <= upto
            ]
            assert (await client.post("/unsubscribe", json={"subscriptionId": sid})).json() == {
                "status": "ok"
            }
    finally:
        await peer.stop()


async def test_the_spec_404s_and_400s_from_the_real_services(gateway_mesh: GatewayMesh) -> None:
    async with httpx.AsyncClient(base_url=gateway_mesh.url, timeout=30) as client:
        cases = [
            (
                "POST",
                "/send",
                {"pubsubTopic": "/waku/2/rs/9/9", "contentTopic": CONFIRMED, "payload": ""},
                404,
                "Failed to send message. Target pubsubTopic '/waku/2/rs/9/9' not supported.",
            ),
            (
                "POST",
                "/subscribe",
                {"pubsubTopic": "/waku/2/rs/0/2", "contentTopic": CONFIRMED},
                404,
                "Cannot create subscription. clusterId 0 is not supported.",
            ),
            ("GET", "/message?requestId=xyz789", None, 404, "Message with requestId 'xyz789' not found"),
            ("GET", "/message?hash=abc123", None, 404, "Message with hash 'abc123' not found"),
            (
                "GET",
                "/messages?contentTopic=/none/1/here/proto",
                None,
                404,
                "No messages found for contentTopic '/none/1/here/proto'",
            ),
            (
                "GET",
                "/messages?subscriptionId=1692854c-cbde-4afe-901f-1c86ecbd9ea9",
                None,
                404,
                "No messages found for subscriptionId '1692854c-cbde-4afe-901f-1c86ecbd9ea9'",
            ),
            (
                "POST",
                "/send",
                {"contentTopic": CONFIRMED, "payload": "not base64!"},
                400,
                "payload: not valid base64 (standard alphabet, padded)",
            ),
            (
                "POST",
                "/send",
                {"contentTopic": CONFIRMED, "payload": "", "meta": base64.b64encode(b"m" * 65).decode()},
                400,
                "meta is 65 bytes; at most 64 (14/WAKU2-MESSAGE)",  # the send service's own check
            ),
            (
                "POST",
                "/send",
                {"contentTopic": CONFIRMED, "payload": "", "meta": base64.b64encode(b"m" * 67).decode()},
                400,
                "meta: too large (more than 88 characters of base64)",
            ),
            (
                "POST",
                "/send/cancel",
                {"requestId": "xyz789"},
                400,
                "requestId: not a GUID (lowercase 8-4-4-4-12 hex digits)",
            ),
        ]
        for method, path, body, status, error in cases:
            reply = await client.request(method, path, json=body)
            assert (reply.status_code, reply.json()) == (status, {"error": error}), (method, path)
        reply = await client.post("/send", json={"contentTopic": "/bad", "payload": ""})
        assert reply.status_code == 400 and reply.json()["error"].startswith("contentTopic:")
        # The send service's own validation (timestamp far in the future) passes through as a 400.
        far = 4_000_000_000 * 10**9
        reply = await client.post("/send", json={"contentTopic": CONFIRMED, "payload": "", "timestamp": far})
        assert reply.status_code == 400 and "future" in reply.json()["error"], reply.text
