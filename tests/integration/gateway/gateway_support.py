"""The gateway in-process on free ports, in front of the fakes (:mod:`.gateway_fakes`), and an SSE reader."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from meshcore import MeshServer
from meshcore.security import ChannelSecurity
from services.gateway.config import Config
from services.gateway.server import Deps, HttpServer, build, connect
from tests.integration.gateway.gateway_fakes import Fakes

CLIENT_TOKEN = "client-token-alpha-0001"
OTHER_CLIENT_TOKEN = "client-token-beta-00002"
SERVICE_TOKEN = "service-token-gamma-003"
ADMIN_TOKEN = "admin-token-delta-00004"
AUTH_ENV = {
    "MAILMESH_AUTH": "token",
    "MAILMESH_AUTH_CLIENT_TOKENS": f"{CLIENT_TOKEN},{OTHER_CLIENT_TOKEN}",
    "MAILMESH_AUTH_SERVICE_TOKENS": SERVICE_TOKEN,
    "MAILMESH_AUTH_ADMIN_TOKENS": ADMIN_TOKEN,
}
"""The mesh's token auth (docs/security.md "Tokens and roles"): pass as ``make_gateway(**AUTH_ENV)``."""


def gateway_env(upstream: str, **extra: str) -> dict[str, str]:
    """GATEWAY_* variables of a test instance: ports 0, every upstream on the fakes' address."""
    env = {
        "GATEWAY_GRPC_HOST": "127.0.0.1",
        "GATEWAY_GRPC_PORT": "0",
        "GATEWAY_METRICS_PORT": "-1",
        "GATEWAY_HTTP_HOST": "127.0.0.1",
        "GATEWAY_HTTP_PORT": "0",
        "GATEWAY_SEND_ADDR": upstream,
        "GATEWAY_SUBSCRIPTION_ADDR": upstream,
        "GATEWAY_HEALTH_ADDR": upstream,
        "GATEWAY_SHUTDOWN_GRACE_SECONDS": "5",
        "GATEWAY_ACCESS_LOG": "false",
    }
    env.update(extra)
    return env


@dataclass
class GatewayHandle:
    """A running gateway, its fakes and an HTTP client to it."""

    cfg: Config
    deps: Deps
    mesh: MeshServer
    http: HttpServer
    registry: CollectorRegistry
    fakes: Fakes
    client: httpx.AsyncClient

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.port}"

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels or None) or 0.0

    async def stop(self) -> None:
        await self.client.aclose()
        await self.mesh.stop(5)


async def start_gateway(fakes: Fakes, **env: str) -> GatewayHandle:
    """Build and start a gateway over ``fakes`` with extra ``env``."""
    cfg = Config.from_env(gateway_env(fakes.address, **env))
    registry = CollectorRegistry()
    # What __main__'s setup_observability installs: the service token when MAILMESH_AUTH=token.
    deps = connect(cfg, registry=registry, security=ChannelSecurity.from_config(cfg.runtime.security))
    mesh, http = build(cfg, deps)
    await mesh.start()
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{http.port}", timeout=30)
    return GatewayHandle(cfg, deps, mesh, http, registry, fakes, client)


@dataclass
class SseItem:
    """One SSE block: an event (id, event, data) or a comment."""

    id: str | None = None
    event: str | None = None
    data: str | None = None
    comment: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        assert self.data is not None
        return json.loads(self.data)


async def sse_items(response: httpx.Response) -> AsyncIterator[SseItem]:
    """Parse a text/event-stream response (WHATWG HTML "Server-sent events": fields, blank-line dispatch)."""
    item = SseItem()
    async for line in response.aiter_lines():
        if line == "":
            if item != SseItem():
                yield item
            item = SseItem()
            continue
        if line.startswith(":"):
            yield SseItem(comment=line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            item.id = value
        elif name == "event":
            item.event = value
        elif name == "data":
            item.data = value if item.data is None else item.data + "\n" + value
        elif name == "retry":
            item.retry = int(value)
