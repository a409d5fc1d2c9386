"""The mesh of the fault campaign: every service as a process, a fault proxy on each internal hop.

Each hop the campaign injects faults into is a ``(client kind, dependency kind)`` pair with a
:class:`~meshharness.faultproxy.FaultProxy` of its own, put in front of the dependency by
``meshharness.plan(route=...)``: the client is given the proxy's address, the proxy forwards to the real one.
Everything else (the RLPx peer, the test's own gRPC clients, the health service's checks of other services)
talks to the services directly, so a fault hits exactly one hop.

Deadlines and keepalive are short so a campaign takes minutes (:data:`SETTINGS`); each is the documented
setting a deployment would tune.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import grpc.aio

from mailmesh.health.v1 import health_pb2_grpc
from mailmesh.history.v1 import history_pb2_grpc
from mailmesh.send.v1 import send_pb2_grpc
from mailmesh.subscription.v1 import subscription_pb2 as sub_pb
from mailmesh.subscription.v1 import subscription_pb2_grpc
from meshharness import CATALOG, FaultProxy, FreePorts, Mesh, ServiceProcess, ServiceSpec, plan, start_mesh
from wakunode.client import WakuClient
from wakunode.config import NodeConfig
from wakunode.memory import MemorySink

__all__ = ["BRIDGED", "HOPS", "KEEPALIVE", "SETTINGS", "TOPIC", "FaultMesh", "Hop"]

TOPIC = b"\x0f\xa0\x17\x01"
"""Every envelope of the campaign: relayed, archived, subscribed to."""
BRIDGED = "/waku/1/0x0fa01701/rfc26"
"""The same topic as a content topic (Sends and the subscription use it)."""
SERVICES = ["archive", "ingest", "history", "edge_peer", "health", "send", "subscription"]

Hop = tuple[str, str]
"""``(client kind, dependency kind)``."""
HOPS: tuple[Hop, ...] = (
    ("edge_peer", "ingest"),
    ("edge_peer", "history"),
    ("ingest", "archive"),
    ("history", "archive"),
    ("send", "edge_peer"),
    ("subscription", "edge_peer"),
    ("subscription", "send"),
    ("health", "edge_peer"),
)
"""The internal hops with a proxy (issue 14 item 3 names all but edge peer → history)."""

KEEPALIVE = (1.0, 2.0)
"""Keepalive of every process: ping after 1 s of silence, drop the connection 2 s later."""
SETTINGS: Mapping[str, Mapping[str, str]] = {
    "archive": {"ARCHIVE_BACKEND": "sqlite"},
    # One write gets 1 s, three attempts; ingest reconnects to the archive within 1 s of its return.
    "ingest": {
        "INGEST_MIN_POW": "0",
        "INGEST_ARCHIVE_TIMEOUT_SECONDS": "1",
        "INGEST_ARCHIVE_RECONNECT_MAX_SECONDS": "1",
    },
    "history": {"HISTORY_ARCHIVE_TIMEOUT_SECONDS": "1"},
    "edge_peer": {
        "EDGE_MIN_POW": "0",
        "EDGE_CONFIRMATIONS": "true",
        "EDGE_REQUEST_TIMEOUT_SECONDS": "3",
        "EDGE_INGEST_RECONNECT_MAX_SECONDS": "1",
    },
    "health": {
        "HEALTH_MINIMALLY_HEALTHY_PEERS": "1",
        "HEALTH_HEALTHY_PEERS": "1",
        "HEALTH_HOLD_SECONDS": "0",
    },
    "send": {
        "MSGSTORE_BACKEND": "sqlite",
        "SEND_CALL_TIMEOUT_SECONDS": "1",
        "SEND_BACKOFF_SECONDS": "0.5",
        "SEND_RETRIES": "5",
    },
    "subscription": {
        "MSGSTORE_BACKEND": "sqlite",
        "SUBSCRIPTION_CALL_TIMEOUT_SECONDS": "1",
        "SUBSCRIPTION_TAIL_INTERVAL_SECONDS": "0.05",
    },
}
"""Per kind, on top of the keepalive every process gets (:data:`KEEPALIVE`)."""


@dataclass
class FaultMesh:
    """The running mesh, its proxies, an RLPx peer on the edge peer and the clients the campaign drives."""

    processes: Mesh
    proxies: dict[Hop, FaultProxy]
    peer: WakuClient
    peer_key: bytes
    sink: MemorySink
    subscription_id: str
    channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    def get(self, kind: str) -> ServiceProcess:
        """The one process of ``kind``."""
        [found] = self.processes.of_kind(kind)
        return found

    def channel(self, kind: str) -> grpc.aio.Channel:
        """A plain channel of the campaign's own to ``kind`` (not through any proxy)."""
        if kind not in self.channels:
            self.channels[kind] = grpc.aio.insecure_channel(self.get(kind).address)
        return self.channels[kind]

    @property
    def send(self) -> send_pb2_grpc.SendServiceAsyncStub:
        """The send service."""
        return send_pb2_grpc.SendServiceStub(self.channel("send"))

    @property
    def subscription(self) -> subscription_pb2_grpc.SubscriptionServiceAsyncStub:
        """The subscription service."""
        return subscription_pb2_grpc.SubscriptionServiceStub(self.channel("subscription"))

    @property
    def history(self) -> history_pb2_grpc.HistoryQueryServiceAsyncStub:
        """The history-query service."""
        return history_pb2_grpc.HistoryQueryServiceStub(self.channel("history"))

    @property
    def health(self) -> health_pb2_grpc.HealthServiceAsyncStub:
        """The health service."""
        return health_pb2_grpc.HealthServiceStub(self.channel("health"))

    @classmethod
    async def start(
        cls, work: Path, hops: tuple[Hop, ...] = HOPS, keepalive: tuple[float, float] = KEEPALIVE
    ) -> FaultMesh:
        """Proxies first (the clients are given their addresses), then the processes, then the peer.

        ``keepalive`` (time, timeout in seconds) may be set long to see what a hop does without it.
        """
        work.mkdir(parents=True, exist_ok=True)
        secret = work / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
        secret.write_text(os.urandom(32).hex() + "\n")
        secret.chmod(0o600)
        proxies = {hop: await FaultProxy("127.0.0.1:1").start() for hop in hops}

        def route(client: str, dependency: str, address: str) -> str:
            proxy = proxies.get((client, dependency))
            if proxy is None:
                return address
            proxy.upstream = (
                "127.0.0.1",
                int(address.rpartition(":")[2]),
            )  # planned before the client starts
            return proxy.address

        def specs() -> list[ServiceSpec]:
            pings = {
                "MAILMESH_GRPC_KEEPALIVE_SECONDS": f"{keepalive[0]:g}",
                "MAILMESH_GRPC_KEEPALIVE_TIMEOUT_SECONDS": f"{keepalive[1]:g}",
            }
            env = {kind: {**pings, **SETTINGS.get(kind, {})} for kind in SERVICES}
            return plan(SERVICES, ports=FreePorts(), state_dir=work, env=env, route=route)

        processes = await asyncio.to_thread(start_mesh, specs, timeout=120, log_dir=work / "logs")
        sink = MemorySink()
        peer = WakuClient(config=NodeConfig(pow_requirement=0.0), sink=sink)
        try:
            await peer.start()
            edge = processes.of_kind("edge_peer")[0]
            line = edge.logs.wait_for(lambda line: bool(line.record and line.record.get("enode")), 60)
            assert line.record is not None
            info = await peer.connect(str(line.record["enode"]))
            mesh = cls(processes, proxies, peer, info.pubkey, sink, "")
            mesh.subscription_id = await _subscribe(mesh.subscription)
        except BaseException:
            await peer.stop()
            await asyncio.to_thread(processes.stop, 5)
            raise
        return mesh

    async def stop(self) -> dict[str, int]:
        """Stop the peer, the clients, the processes (SIGTERM) and the proxies; exit statuses by name."""
        await self.peer.stop()
        for channel in self.channels.values():
            await channel.close()
        for proxy in self.proxies.values():
            proxy.clear()
        codes = await asyncio.to_thread(self.processes.stop, 15)
        for proxy in self.proxies.values():
            await proxy.close()
        return codes


async def _subscribe(stub: subscription_pb2_grpc.SubscriptionServiceAsyncStub) -> str:
    """Subscribe to the campaign's topic once the only replica holds the writer lease."""
    async with asyncio.timeout(60):
        while True:
            try:
                reply = await stub.Subscribe(sub_pb.SubscribeRequest(content_topics=[BRIDGED]), timeout=10)
            except grpc.aio.AioRpcError as err:
                if err.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise
                await asyncio.sleep(0.1)  # the writer lease is taken a moment after start
                continue
            return reply.subscription_id
