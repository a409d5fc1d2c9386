"""Security and limits: the mesh's bearer tokens (MAILMESH_AUTH on and off), CORS allow-list, per-client
rate limit, no token or payload in the logs, the OpenAPI document and docs page reachable without a token."""

from __future__ import annotations

import logging

import pytest

from tests.integration.gateway.gateway_support import (
    ADMIN_TOKEN,
    AUTH_ENV,
    CLIENT_TOKEN,
    OTHER_CLIENT_TOKEN,
    SERVICE_TOKEN,
    GatewayHandle,
)

TOPIC = "/waku/1/0x01020304/rfc26"


async def test_without_tokens_the_api_is_open(gw: GatewayHandle) -> None:
    assert (await gw.client.get("/subscriptions")).status_code == 200
    assert "securitySchemes" not in (await gw.client.get("/openapi.json")).json().get("components", {})


async def test_with_the_mesh_tokens_every_endpoint_needs_one(make_gateway: object) -> None:
    gw: GatewayHandle = await make_gateway(**AUTH_ENV)  # type: ignore[operator]
    missing = await gw.client.get("/subscriptions")
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, 'Bearer realm="mailmesh"')
    assert missing.json() == {"error": "missing bearer token (Authorization: Bearer <token>)"}
    wrong = (
        "Bearer wrong-token-0000000001",
        f"Basic {CLIENT_TOKEN}",
        f"Bearer {CLIENT_TOKEN}-and-more",
        f"Bearer {CLIENT_TOKEN[:-1]}",
        "Bearer",
    )
    for header in wrong:
        reply = await gw.client.get("/subscriptions", headers={"Authorization": header})
        assert reply.status_code == 401, header
        assert reply.headers["www-authenticate"] == 'Bearer realm="mailmesh", error="invalid_token"'
        assert reply.json() == {"error": "invalid bearer token"}
    assert gw.fakes.failures.tokens == []  # nothing refused reached an upstream service
    # Any known token of the client role or above (the service and admin roles include the client's).
    for token in (CLIENT_TOKEN, OTHER_CLIENT_TOKEN, SERVICE_TOKEN, ADMIN_TOKEN):
        reply = await gw.client.get("/subscriptions", headers={"Authorization": f"Bearer {token}"})
        assert reply.status_code == 200, token
    reply = await gw.client.post("/send", json={"contentTopic": TOPIC, "payload": ""})
    assert reply.status_code == 401 and gw.fakes.send.requests == []
    assert (await gw.client.get("/openapi.json")).status_code == 200
    assert (await gw.client.get("/docs")).status_code == 200
    doc = (await gw.client.get("/openapi.json")).json()
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert doc["paths"]["/send"]["post"]["security"] == [{"bearerAuth": []}]
    assert gw.metric("mailmesh_gateway_rejected_total", reason="unauthenticated") == 7
    # The gateway's own calls carry its service token, whichever token the REST client presented.
    assert gw.fakes.failures.tokens == [SERVICE_TOKEN] * 4


async def test_without_auth_the_upstream_calls_carry_no_token(gw: GatewayHandle) -> None:
    assert (await gw.client.get("/subscriptions")).status_code == 200
    assert gw.fakes.failures.tokens == [None]


async def test_the_rate_limit_counts_each_token_apart(make_gateway: object) -> None:
    gw: GatewayHandle = await make_gateway(
        **AUTH_ENV, GATEWAY_RATE_LIMIT_PER_SECOND="0.01", GATEWAY_RATE_LIMIT_BURST="2"
    )  # type: ignore[operator]
    first, second = ({"Authorization": f"Bearer {t}"} for t in (CLIENT_TOKEN, OTHER_CLIENT_TOKEN))
    codes = [(await gw.client.get("/subscriptions", headers=first)).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    # Same address, another token: a bucket of its own.
    assert (await gw.client.get("/subscriptions", headers=second)).status_code == 200
    sample = "\n".join(str(m) for m in gw.registry.collect())
    assert CLIENT_TOKEN not in sample and OTHER_CLIENT_TOKEN not in sample  # no token in any label


async def test_cors_answers_allowed_origins_only(make_gateway: object) -> None:
    gw: GatewayHandle = await make_gateway(GATEWAY_CORS_ORIGINS="https://app.example.org", **AUTH_ENV)  # type: ignore[operator]
    preflight = await gw.client.options(
        "/send",
        headers={
            "Origin": "https://app.example.org",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )
    assert preflight.status_code == 200  # preflights carry no token (Fetch standard): not refused
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.org"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    other = await gw.client.options(
        "/send", headers={"Origin": "https://evil.example.com", "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in other.headers
    reply = await gw.client.get(
        "/health", headers={"Origin": "https://app.example.org", "Authorization": f"Bearer {CLIENT_TOKEN}"}
    )
    assert reply.headers["access-control-allow-origin"] == "https://app.example.org"


async def test_no_cors_headers_without_an_allow_list(gw: GatewayHandle) -> None:
    reply = await gw.client.get("/health", headers={"Origin": "https://app.example.org"})
    assert "access-control-allow-origin" not in reply.headers


async def test_rate_limit_per_client_with_retry_after(make_gateway: object) -> None:
    gw: GatewayHandle = await make_gateway(GATEWAY_RATE_LIMIT_PER_SECOND="0.5", GATEWAY_RATE_LIMIT_BURST="3")  # type: ignore[operator]
    codes = [(await gw.client.get("/subscriptions")).status_code for _ in range(3)]
    refused = await gw.client.get("/subscriptions")
    assert codes == [200, 200, 200]
    assert refused.status_code == 429 and refused.headers["retry-after"] in ("1", "2")
    assert refused.json()["error"].startswith("rate limit exceeded")
    assert (await gw.client.get("/openapi.json")).status_code == 200  # the document is not counted
    assert gw.metric("mailmesh_gateway_rejected_total", reason="rate_limited") == 1


async def test_access_log_has_no_token_payload_or_query(
    make_gateway: object, caplog: pytest.LogCaptureFixture
) -> None:
    gw: GatewayHandle = await make_gateway(GATEWAY_ACCESS_LOG="true", **AUTH_ENV)  # type: ignore[operator]
    auth = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    with caplog.at_level(logging.DEBUG):
        await gw.client.post(
            "/send", json={"contentTopic": TOPIC, "payload": "c2VjcmV0IHBheWxvYWQ="}, headers=auth
        )
        await gw.client.get("/message", params={"requestId": "query-value"}, headers=auth)
        await gw.client.get("/subscriptions", headers={"Authorization": "Bearer wrong-guess-0000001"})
    access = [r for r in caplog.records if r.name == "services.gateway.access"]
    assert [(r.__dict__["route"], r.__dict__["status"]) for r in access] == [
        ("/send", 200),
        ("/message", 404),
        ("/subscriptions", 401),
    ]
    ours = [r for r in caplog.records if r.name.startswith(("services.", "meshcore.", "uvicorn"))]
    assert ours
    text = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in ours)
    secrets = [CLIENT_TOKEN, SERVICE_TOKEN, "wrong-guess", "c2VjcmV0IHBheWxvYWQ=", "secret payload"]
    secrets.append("query-value")
    for secret in secrets:
        assert secret not in text
