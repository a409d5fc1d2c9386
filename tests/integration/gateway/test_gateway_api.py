"""Every REST endpoint over real HTTP and real gRPC (fake upstreams): MESSAGING-API's paths, methods, JSON
field names, base64 payloads, status codes and error bodies, and what reaches the services."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest

from mailmesh.common.v1 import common_pb2
from tests.integration.gateway.gateway_fakes import make_record
from tests.integration.gateway.gateway_support import GatewayHandle

TOPIC = "/waku/1/0x01020304/rfc26"
GUID = "9978c4f1-4465-4537-9d95-0cf016fb1080"


async def test_send_passes_the_message_upstream_and_answers_the_request_id(gw: GatewayHandle) -> None:
    body = {
        "timestamp": 1_700_000_000_000_000_000,
        "ephemeral": True,
        "meta": "ZXhhbXBsZQ==",
        "pubsubTopic": "/waku/2/rs/1/1",
        "contentTopic": TOPIC,
        "payload": base64.b64encode(b"hello").decode(),
    }
    reply = await gw.client.post("/send", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "application/json"
    (request,) = gw.fakes.send.requests
    assert reply.json() == {"requestId": gw.fakes.send.pending_ids[0]}
    assert request.pubsub_topic == "/waku/2/rs/1/1"
    m = request.message
    assert (m.payload, m.content_topic, m.meta, m.timestamp, m.ephemeral) == (
        b"hello",
        TOPIC,
        b"example",
        1_700_000_000_000_000_000,
        True,
    )


async def test_send_leaves_unset_options_unset(gw: GatewayHandle) -> None:
    reply = await gw.client.post("/send", json={"contentTopic": TOPIC, "payload": ""})
    assert reply.status_code == 200, reply.text
    (request,) = gw.fakes.send.requests
    m = request.message
    assert request.pubsub_topic == "" and m.payload == b""
    assert not m.HasField("meta") and not m.HasField("timestamp") and not m.HasField("ephemeral")


async def test_send_to_an_unserved_pubsub_topic_is_the_spec_404(gw: GatewayHandle) -> None:
    reply = await gw.client.post(
        "/send", json={"pubsubTopic": "string", "contentTopic": TOPIC, "payload": ""}
    )
    assert reply.status_code == 404
    assert reply.json() == {"error": "Failed to send message. Target pubsubTopic 'string' not supported."}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('{"payload": "YQ==", ', "malformed JSON"),
        ("[1, 2]", "body: must be a JSON object"),
        ('{"contentTopic": "/a/1/b/c"}', "payload: is required"),
        ('{"payload": "YQ=="}', "contentTopic: is required"),
        ('{"payload": 5, "contentTopic": "/a/1/b/c"}', "payload: must be a string"),
        ('{"payload": "YQ", "contentTopic": "/a/1/b/c"}', "payload: not valid base64"),
        ('{"payload": "YQ==\\n", "contentTopic": "/a/1/b/c"}', "payload: not valid base64"),
        ('{"payload": "_-8=", "contentTopic": "/a/1/b/c"}', "payload: not valid base64"),
        ('{"payload": "YQ==", "contentTopic": "/a/1/b/c", "meta": "%%"}', "meta: not valid base64"),
        ('{"payload": "YQ==", "contentTopic": "/a/1/b/c", "meta": "' + "A" * 92 + '"}', "meta: too large"),
        (
            '{"payload": "YQ==", "contentTopic": "/a/1/b/c", "timestamp": "1"}',
            "timestamp: must be an integer",
        ),
        ('{"payload": "YQ==", "contentTopic": "/a/1/b/c", "timestamp": -1}', "timestamp: must be >= 0"),
        (
            '{"payload": "YQ==", "contentTopic": "/a/1/b/c", "timestamp": 1.5}',
            "timestamp: must be an integer",
        ),
        (
            '{"payload": "YQ==", "contentTopic": "/a/1/b/c", "ephemeral": "true"}',
            "ephemeral: must be true or",
        ),
        ('{"payload": "YQ==", "contentTopic": 7}', "contentTopic: must be a string"),
        ('{"payload": "YQ==", "contentTopic": "nope"}', "contentTopic: not a content topic"),
        (
            '{"payload": "YQ==", "contentTopic": "/a/1/b/c", "pubsubTopic": null}',
            "pubsubTopic: must be a string",
        ),
    ],
)
async def test_malformed_send_bodies_are_400_naming_the_field(
    gw: GatewayHandle, body: str, error: str
) -> None:
    reply = await gw.client.post("/send", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 400, reply.text
    assert list(reply.json()) == ["error"]
    assert reply.json()["error"].startswith(error), reply.json()
    assert gw.fakes.send.requests == []


async def test_a_body_that_is_not_json_says_so(gw: GatewayHandle) -> None:
    reply = await gw.client.post("/send", content=b"payload=YQ==", headers={"content-type": "text/plain"})
    assert (reply.status_code, reply.json()) == (400, {"error": "Content-Type: must be application/json"})


async def test_an_oversize_payload_is_400_and_an_oversize_body_413(make_gateway: object) -> None:
    gw: GatewayHandle = await make_gateway(GATEWAY_MAX_MESSAGE_BYTES="2048")  # type: ignore[operator]
    fits = base64.b64encode(b"x" * (2048 - 20)).decode()
    over = base64.b64encode(b"x" * (2048 - 19)).decode()
    assert (await gw.client.post("/send", json={"contentTopic": TOPIC, "payload": fits})).status_code == 200
    reply = await gw.client.post("/send", json={"contentTopic": TOPIC, "payload": over})
    assert reply.status_code == 400 and reply.json()["error"].startswith("payload: too large"), reply.text
    huge = b'{"payload": "' + b"A" * (gw.cfg.max_body_bytes + 4) + b'"}'
    reply = await gw.client.post("/send", content=huge, headers={"content-type": "application/json"})
    assert (reply.status_code, reply.json()) == (
        413,
        {"error": f"request body is larger than {gw.cfg.max_body_bytes} bytes"},
    )

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
        for _ in range(8):
            yield b" " * (gw.cfg.max_body_bytes // 4)

    reply = await gw.client.post("/send", content=chunks(), headers={"content-type": "application/json"})
    assert reply.status_code == 413, reply.text
    assert len(gw.fakes.send.requests) == 1
    assert gw.metric("mailmesh_gateway_rejected_total", reason="too_large") == 2


async def test_upstream_invalid_argument_is_400_with_its_text(gw: GatewayHandle) -> None:
    gw.fakes.failures.fail(
        "Send", grpc.StatusCode.INVALID_ARGUMENT, "meta is 65 bytes; at most 64 (14/WAKU2-MESSAGE)"
    )
    reply = await gw.client.post("/send", json={"contentTopic": TOPIC, "payload": ""})
    assert (reply.status_code, reply.json()) == (
        400,
        {"error": "meta is 65 bytes; at most 64 (14/WAKU2-MESSAGE)"},
    )


async def test_cancel_and_pending_requests(gw: GatewayHandle) -> None:
    first = (await gw.client.post("/send", json={"contentTopic": TOPIC, "payload": "YQ=="})).json()[
        "requestId"
    ]
    second = (await gw.client.post("/send", json={"contentTopic": TOPIC, "payload": "Yg=="})).json()[
        "requestId"
    ]
    pending = await gw.client.get("/send/requests")
    assert (pending.status_code, pending.json()) == (200, [first, second])
    reply = await gw.client.post("/send/cancel", json={"requestId": first})
    assert (reply.status_code, reply.json()) == (200, {"status": "ok"})
    # MESSAGING-API cancelRequest: an unknown (or finished) request is ignored.
    reply = await gw.client.post("/send/cancel", json={"requestId": GUID})
    assert (reply.status_code, reply.json()) == (200, {"status": "ok"})
    assert gw.fakes.send.canceled == [first, GUID]
    assert (await gw.client.get("/send/requests")).json() == [second]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"requestId": "xyz789"}, "requestId: not a GUID"),
        ({"requestId": GUID.upper()}, "requestId: not a GUID"),
        ({"requestId": 42}, "requestId: must be a string"),
        ({}, "requestId: is required"),
    ],
)
async def test_cancel_with_a_bad_guid_is_400(gw: GatewayHandle, body: object, error: str) -> None:
    reply = await gw.client.post("/send/cancel", json=body)
    assert reply.status_code == 400 and reply.json()["error"].startswith(error), reply.text
    assert gw.fakes.send.canceled == []


async def test_subscribe_unsubscribe_and_list(gw: GatewayHandle) -> None:
    reply = await gw.client.post("/subscribe", json={"pubsubTopic": "/waku/2/rs/1/0", "contentTopic": TOPIC})
    assert reply.status_code == 200, reply.text
    sid = reply.json()["subscriptionId"]
    uuid.UUID(sid)
    assert list(reply.json()) == ["subscriptionId"]
    (request,) = gw.fakes.subscription.subscribe_requests
    assert (request.pubsub_topic, list(request.content_topics)) == ("/waku/2/rs/1/0", [TOPIC])
    assert (await gw.client.get("/subscriptions")).json() == [sid]
    reply = await gw.client.post("/unsubscribe", json={"subscriptionId": sid})
    assert (reply.status_code, reply.json()) == (200, {"status": "ok"})
    reply = await gw.client.post("/unsubscribe", json={"subscriptionId": GUID})  # unknown: ignored
    assert (reply.status_code, reply.json()) == (200, {"status": "ok"})
    assert (await gw.client.get("/subscriptions")).json() == []
    reply = await gw.client.post("/unsubscribe", json={"subscriptionId": "not-a-guid"})
    assert reply.status_code == 400 and reply.json()["error"].startswith("subscriptionId: not a GUID")


async def test_subscribe_on_another_cluster_is_the_spec_404(gw: GatewayHandle) -> None:
    reply = await gw.client.post("/subscribe", json={"pubsubTopic": "/waku/2/rs/0/2", "contentTopic": TOPIC})
    assert (reply.status_code, reply.json()) == (
        404,
        {"error": "Cannot create subscription. clusterId 0 is not supported."},
    )


async def test_a_record_by_request_id_and_by_hash(gw: GatewayHandle) -> None:
    record = make_record(b"Some other data", "/example/another-topic", request_id=GUID, sending=True)
    record.message.meta = b"m"
    record.message.timestamp = 1_700_000_000_000_000_000
    record.error.detail = "no Waku peer took the envelope"
    await gw.fakes.subscription.add_record(record)
    expected = {
        "sending": True,
        "sent": False,
        "stored": False,
        "received": False,
        "requestId": GUID,
        "messageHash": "0x" + "01" * 32,
        "pubsubTopic": "/waku/2/rs/1/0",
        "message": {
            "payload": "U29tZSBvdGhlciBkYXRh",
            "contentTopic": "/example/another-topic",
            "meta": "bQ==",
            "timestamp": 1_700_000_000_000_000_000,
        },
        "error": "no Waku peer took the envelope",
    }
    reply = await gw.client.get("/message", params={"requestId": GUID})
    assert (reply.status_code, reply.json()) == (200, expected)
    for spelling in ("0x" + "01" * 32, "01" * 32, "0X" + "01" * 32):
        reply = await gw.client.get("/message", params={"hash": spelling})
        assert (reply.status_code, reply.json()) == (200, expected)


async def test_records_received_have_no_request_id(gw: GatewayHandle) -> None:
    await gw.fakes.subscription.add_record(make_record(b"Hello world", "/example/topic", stored=True))
    reply = await gw.client.get("/message", params={"hash": "0x" + "01" * 32})
    assert reply.json() == {
        "sending": False,
        "sent": False,
        "stored": True,
        "received": False,
        "messageHash": "0x" + "01" * 32,
        "pubsubTopic": "/waku/2/rs/1/0",
        "message": {"payload": "SGVsbG8gd29ybGQ=", "contentTopic": "/example/topic"},
    }


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"requestId": "xyz789"}, "Message with requestId 'xyz789' not found"),
        ({"requestId": GUID}, f"Message with requestId '{GUID}' not found"),
        ({"hash": "abc123"}, "Message with hash 'abc123' not found"),
        ({"hash": "0x" + "ab" * 32}, f"Message with hash '0x{'ab' * 32}' not found"),
        ({"hash": "AB" * 32}, f"Message with hash '{'AB' * 32}' not found"),
    ],
)
async def test_unknown_or_invalid_record_keys_are_the_spec_404(
    gw: GatewayHandle, params: dict[str, str], error: str
) -> None:
    reply = await gw.client.get("/message", params=params)
    assert (reply.status_code, reply.json()) == (404, {"error": error})


@pytest.mark.parametrize("params", [{}, {"requestId": GUID, "hash": "00" * 32}])
async def test_message_needs_exactly_one_key(gw: GatewayHandle, params: dict[str, str]) -> None:
    reply = await gw.client.get("/message", params=params)
    assert (reply.status_code, reply.json()) == (400, {"error": "give exactly one of requestId or hash"})


async def test_messages_by_content_topic_and_subscription_with_skip_and_take(gw: GatewayHandle) -> None:
    sid = "1692854c-cbde-4afe-901f-1c86ecbd9ea1"
    for seed in range(1, 4):
        record = make_record(
            bytes([seed]), "/messaging/2/api/utf8", seed=seed, received=True, subscription_ids=(sid,)
        )
        await gw.fakes.subscription.add_record(record)
    reply = await gw.client.get("/messages", params={"contentTopic": "/messaging/2/api/utf8"})
    assert reply.status_code == 200
    assert [r["messageHash"] for r in reply.json()] == ["0x" + f"{s:02x}" * 32 for s in (1, 2, 3)]
    assert reply.json()[0]["received"] is True and "requestId" not in reply.json()[0]
    reply = await gw.client.get("/messages", params={"subscriptionId": sid, "skip": 1, "take": 1})
    assert [r["message"]["payload"] for r in reply.json()] == [base64.b64encode(b"\x02").decode()]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        (
            {"contentTopic": "/messaging/2/api/utf8"},
            "No messages found for contentTopic '/messaging/2/api/utf8'",
        ),
        (
            {"subscriptionId": "1692854c-cbde-4afe-901f-1c86ecbd9ea1"},
            "No messages found for subscriptionId '1692854c-cbde-4afe-901f-1c86ecbd9ea1'",
        ),
        ({"contentTopic": "/x/1/y/z", "skip": 5}, "No messages found for contentTopic '/x/1/y/z'"),
    ],
)
async def test_an_empty_listing_is_the_spec_404(
    gw: GatewayHandle, params: dict[str, object], error: str
) -> None:
    if "skip" in params:
        await gw.fakes.subscription.add_record(make_record(b"a", "/x/1/y/z"))
    reply = await gw.client.get("/messages", params=params)  # type: ignore[arg-type]
    assert (reply.status_code, reply.json()) == (404, {"error": error})


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("", "give exactly one of contentTopic or subscriptionId"),
        ("contentTopic=/a/1/b/c&subscriptionId=x", "give exactly one of contentTopic or subscriptionId"),
        ("contentTopic=/a/1/b/c&skip=-1", "skip: must be >= 0"),
        ("contentTopic=/a/1/b/c&skip=x", "skip: must be an integer"),
        ("contentTopic=/a/1/b/c&take=1.5", "take: must be an integer"),
        ("contentTopic=/a/1/b/c&take=4294967296", "take: must be <= 4294967295"),
        ("contentTopic=/a/1/b/c&wait=soon", "wait: must be a number"),
    ],
)
async def test_bad_listing_parameters_are_400(gw: GatewayHandle, query: str, error: str) -> None:
    reply = await gw.client.get(f"/messages?{query}")
    assert (reply.status_code, reply.json()) == (400, {"error": error})


async def test_health_in_both_vocabularies(gw: GatewayHandle) -> None:
    reply = await gw.client.get("/health")
    assert (reply.status_code, reply.json()) == (
        200,
        {"status": "MinimallyHealthy", "connectionStatus": "PartiallyConnected"},
    )
    await gw.fakes.health.set_status(common_pb2.HEALTH_STATUS_UNSPECIFIED)
    reply = await gw.client.get("/health")
    assert (reply.status_code, reply.headers["retry-after"]) == (503, "1")


@pytest.mark.parametrize(
    ("code", "status", "text", "retry_after"),
    [
        (grpc.StatusCode.UNAVAILABLE, 503, "the subscription service is unavailable; retry later", "1"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 504, "the subscription service did not answer in time", None),
        (grpc.StatusCode.INTERNAL, 502, "the subscription service failed", None),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, 429, "too busy", "1"),
        (grpc.StatusCode.UNAUTHENTICATED, 401, "who are you", None),
        (grpc.StatusCode.PERMISSION_DENIED, 403, "not you", None),
        (grpc.StatusCode.FAILED_PRECONDITION, 409, "owned by another replica", None),
        (grpc.StatusCode.UNIMPLEMENTED, 501, "the subscription service failed", None),
    ],
)
async def test_upstream_statuses_map_to_http(
    gw: GatewayHandle, code: grpc.StatusCode, status: int, text: str, retry_after: str | None
) -> None:
    gw.fakes.failures.fail(
        "ListSubscriptions", code, "ipv4:10.0.0.1:50056 said no" if status >= 500 else text
    )
    if code is grpc.StatusCode.UNAVAILABLE:  # retried by the channel (idempotent): fail every attempt
        for _ in range(2):
            gw.fakes.failures.fail("ListSubscriptions", code, "ipv4:10.0.0.1:50056 said no")
    reply = await gw.client.get("/subscriptions")
    assert (reply.status_code, reply.json()) == (status, {"error": text})
    assert reply.headers.get("retry-after") == retry_after


async def test_rate_limited_upstream_passes_its_delay_as_retry_after(gw: GatewayHandle) -> None:
    gw.fakes.failures.fail("Send", grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", retry_after_ms="2500")
    reply = await gw.client.post("/send", json={"contentTopic": TOPIC, "payload": ""})
    assert (reply.status_code, reply.headers["retry-after"], reply.json()) == (
        429,
        "3",
        {"error": "slow down"},
    )


async def test_unknown_paths_and_methods_keep_the_error_shape(gw: GatewayHandle) -> None:
    reply = await gw.client.get("/nowhere")
    assert reply.status_code == 404 and list(reply.json()) == ["error"]
    reply = await gw.client.get("/send")
    assert reply.status_code == 405 and list(reply.json()) == ["error"]


async def test_request_metrics_are_labelled_by_route_template(gw: GatewayHandle) -> None:
    await gw.client.get("/message", params={"requestId": "a"})
    await gw.client.get("/message", params={"requestId": "b"})
    assert gw.metric("mailmesh_gateway_http_requests_total", route="/message", method="GET", code="404") == 2
    assert (
        gw.metric("mailmesh_gateway_http_request_duration_seconds_count", route="/message", method="GET") == 2
    )
