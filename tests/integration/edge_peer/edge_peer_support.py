"""Integration helpers: fake ingest and history-query gRPC servers, an edge peer built on port 0, waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from prometheus_client import CollectorRegistry, generate_latest

from devp2p.config import ServerConfig, SessionConfig
from mailmesh.edgepeer.v1 import edgepeer_pb2_grpc
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from mailmesh.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from meshcore import MeshServer
from services.edge_peer.clients import HistoryClient, IngestClient
from services.edge_peer.config import Config
from services.edge_peer.logic import EdgePeer
from services.edge_peer.server import Deps, assemble, build
from wakucodec import secp
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakunode.client import WakuClient
from wakunode.config import NodeConfig
from wakunode.memory import MemoryHistory, MemorySink
from wakunode.ports import HistoryBatch, HistoryComplete, MailserverQuery

SESSION = SessionConfig(handshake_timeout=3.0, ping_interval=5.0, dial_timeout=3.0)
CLIENT_SERVER = ServerConfig(host="127.0.0.1", port=0, listen=False, session=SESSION)


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``condition`` every 10 ms; AssertionError after ``timeout`` s (a bounded wait, not sync)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def envelopes(
    count: int, *, topic: bytes = b"\x01\x02\x03\x04", ttl: int = 600, first: int = 0
) -> list[Envelope]:
    """Unsealed envelopes sent now (the edge peers in these tests require PoW 0)."""
    now = int(time.time())
    return [
        make_envelope(expiry=now + ttl, ttl=ttl, topic=topic, data=i.to_bytes(4, "big") * 8, nonce=i)
        for i in range(first, first + count)
    ]


# ---------------------------------------------------------------------------------------------- fake ingest


@dataclass
class FakeIngest(ingest_pb2_grpc.IngestServiceServicer):
    """Acks every batch; can fail streams on purpose (UNAVAILABLE after some batches, without acking)."""

    batches: list[ingest_pb2.IngestBatch] = field(default_factory=list)
    fail_after: int | None = None
    """End each stream with UNAVAILABLE when this many batches arrived on it (not acked)."""
    failures_left: int = 0
    streams: int = 0
    gate: asyncio.Event | None = None
    """When set, acks wait for this event."""

    @property
    def hashes(self) -> list[bytes]:
        from wakucodec.keccak import keccak256

        return [keccak256(e) for b in self.batches for e in b.envelopes]

    async def Ingest(self, request_iterator: Any, context: Any) -> AsyncIterator[ingest_pb2.IngestAck]:
        self.streams += 1
        seen = 0
        async for batch in request_iterator:
            seen += 1
            if self.fail_after is not None and self.failures_left > 0 and seen > self.fail_after:
                self.failures_left -= 1
                await context.abort(grpc.StatusCode.UNAVAILABLE, "archive unavailable (fake)")
            if self.gate is not None:
                await self.gate.wait()
            self.batches.append(batch)
            yield ingest_pb2.IngestAck(batch_id=batch.batch_id, accepted=len(batch.envelopes))

    async def IngestOne(self, request: Any, context: Any) -> ingest_pb2.IngestOneResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "fake")
        raise AssertionError("unreachable")

    async def IngestBatch(self, request: Any, context: Any) -> ingest_pb2.IngestBatchResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "fake")
        raise AssertionError("unreachable")


# ---------------------------------------------------------------------------------------------- fake history


@dataclass
class FakeHistory(history_pb2_grpc.HistoryQueryServiceServicer):
    """history-query over a wakunode MemoryHistory; can fail with a chosen status."""

    store: MemoryHistory = field(default_factory=MemoryHistory)
    fail: tuple[grpc.StatusCode, str] | None = None
    requests: list[history_pb2.HistoryQueryRequest] = field(default_factory=list)
    hold: asyncio.Event | None = None
    """When given, each answer's completion waits for this event (the batches go out first)."""

    async def Query(self, request: Any, context: Any) -> AsyncIterator[history_pb2.HistoryQueryResponse]:
        self.requests.append(request)
        if self.fail is not None:
            await context.abort(*self.fail)
        # As history-query does (protocol-notes §4.2): a requested upper of 0 means now + 60 s.
        upper = request.upper or int(time.time()) + 60
        query = MailserverQuery(
            request=HistoryRequest(
                request.lower,
                upper,
                request.bloom or None,
                tuple(request.topics),
                request.limit or 1000,
                request.cursor,
            ),
            dialect=Dialect.STATUS_PLAIN,
            request_id=request.request_id,
            requester_id=request.requester_peer_id,
            max_batch_bytes=request.max_batch_bytes,
            max_batch_envelopes=request.max_batch_envelopes,
        )
        async for item in self.store.query(query):
            if isinstance(item, HistoryBatch):
                yield history_pb2.HistoryQueryResponse(
                    batch=history_pb2.HistoryBatch(
                        envelopes_rlp=b"".join(item.envelopes),
                        envelope_sizes=[len(e) for e in item.envelopes],
                    )
                )
            elif isinstance(item, HistoryComplete):
                if self.hold is not None:
                    await self.hold.wait()
                yield history_pb2.HistoryQueryResponse(
                    complete=history_pb2.HistoryComplete(
                        next_cursor=item.next_cursor, last_envelope_hash=item.last_envelope_hash
                    )
                )

    async def Lookup(self, request: Any, context: Any) -> history_pb2.LookupResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "fake")
        raise AssertionError("unreachable")

    async def WatchServed(self, request: Any, context: Any) -> AsyncIterator[history_pb2.WatchServedResponse]:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "fake")
        yield history_pb2.WatchServedResponse()  # unreachable: makes this an async generator


async def start_fake(
    servicer: Any, add: Callable[[Any, grpc.aio.Server], None], port: int = 0
) -> tuple[grpc.aio.Server, str]:
    """A plain grpc.aio server with one servicer on 127.0.0.1."""
    server = grpc.aio.server()
    add(servicer, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, f"127.0.0.1:{bound}"


# ---------------------------------------------------------------------------------------------- the edge peer


def edge_env(tmp: Path, ingest: str, history: str, **extra: str) -> dict[str, str]:
    """EDGE_* variables for a test instance: everything on 127.0.0.1 port 0, PoW 0."""
    env = {
        "EDGE_GRPC_HOST": "127.0.0.1",
        "EDGE_GRPC_PORT": "0",
        "EDGE_METRICS_PORT": "-1",
        "EDGE_LISTEN_HOST": "127.0.0.1",
        "EDGE_LISTEN_PORT": "0",
        "EDGE_NODE_KEY_FILE": str(tmp / "nodekey"),
        "EDGE_INGEST_ADDR": ingest,
        "EDGE_HISTORY_ADDR": history,
        "EDGE_MIN_POW": "0",
        "EDGE_INSTANCE": "edge-test",
        "EDGE_SHUTDOWN_GRACE_SECONDS": "2",
        "EDGE_INGEST_RECONNECT_MAX_SECONDS": "0.3",
    }
    env.update(extra)
    return env


@dataclass
class Edge:
    """A running edge peer (devp2p + gRPC) and what the test needs to talk to it."""

    cfg: Config
    edge: EdgePeer
    mesh: MeshServer
    registry: CollectorRegistry
    channel: grpc.aio.Channel

    @property
    def enode(self) -> str:
        return self.edge.server.enode

    @property
    def pubkey(self) -> bytes:
        return self.edge.server.pubkey

    @property
    def stub(self) -> edgepeer_pb2_grpc.EdgePeerServiceAsyncStub:
        return edgepeer_pb2_grpc.EdgePeerServiceStub(self.channel)

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        value = self.registry.get_sample_value(name, dict(labels or {}))
        return 0.0 if value is None else value

    def scrape(self) -> str:
        return generate_latest(self.registry).decode()


async def start_edge(tmp: Path, ingest: str, history: str, **extra: str) -> Edge:
    """Assemble, build and start an edge peer the way __main__ does, with a private metrics registry."""
    cfg = Config.from_env(edge_env(tmp, ingest, history, **extra))
    registry = CollectorRegistry()
    max_bytes = cfg.runtime.max_message_bytes
    ingest_client = IngestClient.connect(
        cfg.ingest_addr, source=cfg.instance, max_message_bytes=max_bytes, registry=registry
    )
    history_client = HistoryClient.connect(
        cfg.history_addr, timeout_s=cfg.request_timeout_s, max_message_bytes=max_bytes, registry=registry
    )
    edge = assemble(cfg, secp.generate_private_key(), ingest_client, history_client)
    mesh = build(cfg, Deps(edge, closers=(ingest_client.close, history_client.close), registry=registry))
    await edge.start()
    await mesh.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}")
    return Edge(cfg, edge, mesh, registry, channel)


async def stop_edge(handle: Edge) -> None:
    await handle.channel.close()
    await handle.mesh.stop(grace=1.0)


def relay_client(sink: MemorySink | None = None) -> WakuClient:
    """A client that also takes relayed envelopes (full bloom, PoW 0)."""
    return WakuClient(config=NodeConfig(pow_requirement=0.0), server_config=CLIENT_SERVER, sink=sink)


def request_client() -> WakuClient:
    """A requester (no relay traffic)."""
    return WakuClient(server_config=CLIENT_SERVER)


def history_query() -> MailserverQuery:
    """A small status-go-dialect mailserver query (what HistoryClient.query takes)."""
    return MailserverQuery(
        request=HistoryRequest(lower=1, upper=2, topics=(b"\x01\x02\x03\x04",), limit=10),
        dialect=Dialect.STATUS_PLAIN,
        request_id=b"\x01" * 32,
        requester_id=b"\x02" * 32,
        max_batch_bytes=1 << 20,
        max_batch_envelopes=1000,
    )
