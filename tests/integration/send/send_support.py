"""The send service on port 0 in front of a real mesh: archive, ingest, history-query and an edge peer (real
devp2p), optionally the health service; real wakunode RLPx peers connect to the edge peer."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc.aio
from prometheus_client import CollectorRegistry

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from meshcore import MeshServer
from services.send.config import Config
from services.send.server import Deps, build, connect
from tests.integration.edge_peer.edge_peer_support import Edge, relay_client, start_edge, stop_edge
from tests.integration.health.health_support import HealthHandle, start_health
from tests.integration.history.history_support import (
    ArchiveHandle,
    HistoryHandle,
    start_archive,
    start_history,
)
from tests.integration.ingest.ingest_support import IngestHandle, start_ingest
from wakunode.client import WakuClient
from wakunode.memory import MemorySink

TOPIC = "/waku/1/0x0a0b0c0d/rfc26"
S = common_pb2  # SendState values: S.SEND_STATE_QUEUED, ...


@dataclass
class Mesh:
    """The services a send replica calls."""

    tmp: Path
    archive: ArchiveHandle
    ingest: IngestHandle
    history: HistoryHandle
    edge: Edge
    health: HealthHandle | None = None
    clients: list[WakuClient] = field(default_factory=list)

    @property
    def edge_address(self) -> str:
        return f"127.0.0.1:{self.edge.mesh.port}"

    async def peer(self) -> tuple[WakuClient, MemorySink]:
        """A relaying Waku peer (PoW 0, full bloom) connected to the edge peer, ready on both sides (the edge
        peer relays to it only once it has the peer's Status)."""
        sink = MemorySink()
        client = relay_client(sink)
        await client.start()
        self.clients.append(client)
        await client.connect(self.edge.enode)
        await self.edge.edge.node.wait_ready(client.server.pubkey, 10.0)
        return client, sink

    async def start_health(self) -> HealthHandle:
        """The real health service: one Waku peer is Healthy, none Unhealthy, no hysteresis."""
        self.health = await start_health(
            [self.edge_address],
            [self.archive.address],
            HEALTH_MINIMALLY_HEALTHY_PEERS="1",
            HEALTH_HEALTHY_PEERS="1",
            HEALTH_HOLD_SECONDS="0",
        )
        return self.health

    def send_env(self, db: Path, **extra: str) -> dict[str, str]:
        env = {
            "SEND_GRPC_HOST": "127.0.0.1",
            "SEND_GRPC_PORT": "0",
            "SEND_METRICS_PORT": "-1",
            "SEND_SHUTDOWN_GRACE_SECONDS": "2",
            "SEND_EDGE_ADDR": self.edge_address,
            "SEND_HISTORY_ADDR": self.history.address,
            "SEND_HEALTH_ADDR": f"127.0.0.1:{self.health.mesh.port}" if self.health else "",
            "SEND_SUBSCRIPTION_ADDR": "",  # tests that want subscriptions give their own
            "SEND_PUBLISH_TIMEOUT_SECONDS": "1",  # > one relay broadcast round (300 ms)
            "SEND_STORE_CHECK_DELAY_SECONDS": "0.3",
            "SEND_LEASE_TTL_SECONDS": "3",
            "SEND_ADOPT_INTERVAL_SECONDS": "0.2",
            "SEND_WATCH_POLL_SECONDS": "0.05",
            "MSGSTORE_BACKEND": "sqlite",
            "MSGSTORE_SQLITE_PATH": str(db),
            "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "0.5",
            "MSGSTORE_OUTBOX_SHARDS": "4",
        }
        env.update(extra)
        return env

    async def close(self) -> None:
        for client in self.clients:
            await client.stop()
        if self.health is not None:
            await self.health.stop()
        await stop_edge(self.edge)
        await self.history.stop()
        await self.ingest.stop()
        await self.archive.stop()


async def start_mesh(tmp: Path) -> Mesh:
    archive = await start_archive(tmp / "archive.db")
    ingest = await start_ingest(archive.address, INGEST_BATCH_MAX_DELAY_MS="20")
    history = await start_history(archive.address, [secrets.token_bytes(32)])
    home = tmp / "edge"
    home.mkdir()
    edge = await start_edge(home, f"127.0.0.1:{ingest.mesh.port}", history.address)
    return Mesh(tmp, archive, ingest, history, edge)


@dataclass
class SendHandle:
    """A started send replica and a stub to it."""

    cfg: Config
    deps: Deps
    mesh: MeshServer
    registry: CollectorRegistry
    channel: grpc.aio.Channel

    @property
    def stub(self) -> send_pb2_grpc.SendServiceAsyncStub:
        return send_pb2_grpc.SendServiceStub(self.channel)

    async def send(self, **kw: Any) -> send_pb2.SendResponse:
        message = kw.pop("message", common_pb2.WakuMessage(payload=b"hello", content_topic=TOPIC))
        return await self.stub.Send(send_pb2.SendRequest(message=message, **kw), timeout=10)

    async def status(self, request_id: str) -> send_pb2.SendStatus:
        reply = await self.stub.GetSendStatus(
            send_pb2.GetSendStatusRequest(request_id=request_id), timeout=10
        )
        return reply.status

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.registry.get_sample_value(name, labels or {}) or 0.0

    async def stop(self, *, release: bool = True) -> None:
        """Stop gracefully; ``release=False`` keeps the shard leases and the membership as a killed replica
        would (they expire on their own)."""
        if not release:
            self.deps.engine.ownership.forget()
        await self.channel.close()
        await self.mesh.stop(grace=2.0)


async def start_send(mesh: Mesh, db: Path, **extra: str) -> SendHandle:
    cfg = Config.from_env(mesh.send_env(db, **extra))
    registry = CollectorRegistry()
    deps = connect(cfg, registry=registry)
    server = build(cfg, deps)
    await server.start()
    return SendHandle(cfg, deps, server, registry, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}"))


class Watch:
    """WatchSendStatuses from the start of the log, collected per request."""

    def __init__(self, handle: SendHandle, after: bytes | None = b"") -> None:
        request = send_pb2.WatchSendStatusesRequest()
        if after is not None:  # None: live changes only
            request.after_position = after
        self.call = handle.stub.WatchSendStatuses(request)
        self.changes: list[send_pb2.SendStatus] = []
        self.position = after or b""
        self._changed = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for reply in self.call:
            if reply.HasField("status"):
                self.changes.append(reply.status)
            self.position = reply.position
            self._changed.set()
            self._changed = asyncio.Event()

    def of(self, request_id: str) -> list[send_pb2.SendStatus]:
        return [c for c in self.changes if c.request_id == request_id]

    def states(self, request_id: str) -> list[int]:
        return [c.progress.state for c in self.of(request_id)]

    async def until(self, request_id: str, state: int, timeout: float = 30.0) -> send_pb2.SendStatus:
        """The first change of ``request_id`` into ``state``."""
        async with asyncio.timeout(timeout):
            while True:
                for c in self.of(request_id):
                    if c.progress.state == state:
                        return c
                await self._changed.wait()

    async def close(self) -> None:
        self.call.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
