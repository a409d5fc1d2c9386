"""One whole mesh with the gateway for every gateway end-to-end test, started once per session (the mesh
takes ~20 s to come up on the shared box): archive, ingest, history, edge peer, health, send, subscription
and gateway as processes on free ports. Tests keep to their own content topics and subscriptions, so they do
not see each other's messages. At the end every service must exit 0 on SIGTERM with no unexpected
WARNING/ERROR line."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from meshharness import FreePorts, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from tests.e2e.e2e_rlpx_support import START_DEADLINE_S, STOP_GRACE_S, _enode, assert_clean_stop

#: A content topic bridged to a 4-byte Waku v1 topic, monitored from start-up (MSGAPI_CONFIRM_CONTENT_TOPICS).
CONFIRMED = "/waku/1/0x0e0f1013/rfc26"


@dataclass
class GatewayMesh:
    """The running mesh: the gateway's URL and the edge peer's enode."""

    processes: ProcessMesh
    url: str
    enode: str


def ready(url: str, headers: Mapping[str, str] | None = None) -> None:
    """Every service SERVING is not yet every answer: the health service has a status once it evaluated,
    and the subscription service takes Subscribe once it holds the writer lease (503 until then). Wait for
    both, so no test (Schemathesis's "no 5xx" least of all) sees the start-up. ``headers``: e.g. the client's
    bearer token when auth is on."""
    deadline = time.monotonic() + START_DEADLINE_S
    with httpx.Client(base_url=url, timeout=10, headers=headers) as client:
        while True:
            health = client.get("/health")
            subscribed = client.post("/subscribe", json={"contentTopic": "/mailmesh/1/ready/proto"})
            if health.status_code == 200 and subscribed.status_code == 200:
                client.post("/unsubscribe", json={"subscriptionId": subscribed.json()["subscriptionId"]})
                return
            assert time.monotonic() < deadline, f"gateway not ready: {health.text} {subscribed.text}"
            time.sleep(0.1)  # retry interval of a refused call, not a synchronisation


@pytest.fixture(scope="session")
def gateway_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayMesh]:
    tmp: Path = tmp_path_factory.mktemp("gateway-mesh")
    (tmp / "cursor.secret").write_text("33" * 32 + "\n")
    (tmp / "cursor.secret").chmod(0o600)
    messaging = {
        "MSGSTORE_BACKEND": "sqlite",
        "MSGAPI_STORE_CONFIRMATION": "true",
        "MSGAPI_CONFIRM_CONTENT_TOPICS": CONFIRMED,
        "MSGAPI_STORE_CHECK_INTERVAL_SECONDS": "0.3",
    }

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer", "health", "send", "subscription", "gateway"],
            ports=FreePorts(),
            state_dir=tmp,
            env={
                "archive": {"ARCHIVE_BACKEND": "sqlite"},
                "ingest": {"INGEST_MIN_POW": "0"},
                "edge_peer": {"EDGE_MIN_POW": "0"},
                "health": {
                    "HEALTH_MINIMALLY_HEALTHY_PEERS": "1",
                    "HEALTH_HEALTHY_PEERS": "1",
                    "HEALTH_HOLD_SECONDS": "0",
                    "HEALTH_SEND_ADDR": "",
                    "HEALTH_SUBSCRIPTION_ADDR": "",
                },
                "send": {**messaging, "SEND_STORE_CHECK_DELAY_SECONDS": "0.2"},
                "subscription": {**messaging, "SUBSCRIPTION_TAIL_INTERVAL_SECONDS": "0.05"},
                "gateway": {"GATEWAY_SSE_HEARTBEAT_SECONDS": "1"},
            },
        )

    mesh = start_mesh(specs, timeout=START_DEADLINE_S, log_dir=tmp / "logs")
    try:
        gateway = mesh.get("gateway")
        url = f"http://127.0.0.1:{gateway.spec.env['GATEWAY_HTTP_PORT']}"
        ready(url)
        yield GatewayMesh(mesh, url, _enode(mesh.get("edge_peer")))
    finally:
        codes = mesh.stop(STOP_GRACE_S)
    assert_clean_stop(mesh, codes)
