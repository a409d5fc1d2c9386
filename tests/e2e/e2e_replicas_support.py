"""Helpers of the replica e2e tests: balanced clients, what the archive holds, history pages, a load of
confirmed RLPx posts, and which replica is doing what (from its gRPC metrics).

"Acknowledged" is what a client was told: an envelope the edge peer confirmed (Message Response and Batch Ack
with no error for it, EDGE_CONFIRMATIONS; status-go's confirmations, protocol-notes §3.6), a Send that
returned a request id. These are what must never be lost.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc
import grpc.aio
from prometheus_client import CollectorRegistry

from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from meshcore.clients import make_channel
from meshharness import ServiceProcess
from tests.integration.edge_peer.edge_peer_support import envelopes
from wakucodec.envelope import decode_envelope
from wakucodec.responses import split_sized
from wakunode.client import WakuClient

__all__ = [
    "HISTORY",
    "Poster",
    "archived",
    "balanced",
    "client_channel",
    "history_page",
    "open_calls",
]

HISTORY = "mailmesh.history.v1.HistoryQueryService"


def balanced(services: Sequence[ServiceProcess]) -> str:
    """The address setting naming every replica (``127.0.0.1:a,127.0.0.1:b``)."""
    return ",".join(s.address for s in services)


def client_channel(target: str, service: str, *, idempotent: Sequence[str] = ()) -> grpc.aio.Channel:
    """A client's channel as a service opens one (round-robin, keepalive; retries of ``idempotent``)."""
    return make_channel(
        target,
        service_name=service,
        timeout_s=30,
        retry_attempts=3 if idempotent else 1,
        idempotent_methods=idempotent,
        registry=CollectorRegistry(),
    )


def open_calls(service: ServiceProcess, method: str) -> float:
    """Calls of ``method`` the service has started and not finished (a long stream is one)."""
    started = handled = 0.0
    for (name, labels), value in service.metrics().items():
        if dict(labels).get("grpc_method") != method:
            continue
        if name == "grpc_server_started_total":
            started += value
        elif name == "grpc_server_handled_total":
            handled += value
    return started - handled


async def archived(archive: ServiceProcess, hashes: Sequence[bytes]) -> set[bytes]:
    """Which of ``hashes`` the archive replica holds (ContainsEnvelopes, in chunks)."""
    found: set[bytes] = set()
    async with grpc.aio.insecure_channel(archive.address) as channel:
        stub = archive_pb2_grpc.ArchiveServiceStub(channel)
        for start in range(0, len(hashes), 500):
            request = archive_pb2.ContainsEnvelopesRequest(envelope_hashes=hashes[start : start + 500])
            reply = await stub.ContainsEnvelopes(request, timeout=30)
            found.update(reply.present_envelope_hashes)
    return found


async def history_page(
    channel: grpc.aio.Channel, topic: bytes, *, limit: int, cursor: bytes = b""
) -> tuple[list[bytes], bytes]:
    """One history page of ``topic`` (the whole time range): its envelope hashes and the next cursor."""
    stub = history_pb2_grpc.HistoryQueryServiceStub(channel)
    request = history_pb2.HistoryQueryRequest(lower=1, upper=0, topics=[topic], limit=limit, cursor=cursor)
    hashes: list[bytes] = []
    async for reply in stub.Query(request, timeout=30):
        if reply.WhichOneof("kind") == "batch":
            raws = split_sized(reply.batch.envelopes_rlp, reply.batch.envelope_sizes)
            hashes.extend(decode_envelope(raw).hash for raw in raws)
        else:
            return hashes, reply.complete.next_cursor
    raise AssertionError("history ended the stream without a completion")


@dataclass
class Poster:
    """Posts batches of fresh envelopes to one edge peer, each waiting for the edge peer's confirmation."""

    client: WakuClient
    pubkey: bytes
    topic: bytes
    batch: int = 10
    confirmed: list[bytes] = field(default_factory=list)
    """Hashes of the envelopes the edge peer confirmed, in order."""
    unconfirmed: int = 0
    """Batches that got no confirmation within the timeout (not acknowledged, so not counted)."""
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def post_one(self) -> None:
        """Post one batch and record what was confirmed."""
        first = next(self._numbers) * self.batch
        batch = envelopes(self.batch, topic=self.topic, first=first)
        result = await self.client.post(self.pubkey, batch, confirm_timeout=30)
        if result.response is None:
            self.unconfirmed += 1
            return
        refused = {e.envelope_hash for e in result.response.errors}
        self.confirmed.extend(e.hash for e in batch if e.hash not in refused)

    async def run(self) -> None:
        """Post until :meth:`stop` (each post waits for its confirmation: the load paces itself)."""
        while not self._stop.is_set():
            await self.post_one()

    def stop(self) -> None:
        """End :meth:`run` after the batch in flight."""
        self._stop.set()

    async def until_confirmed(self, count: int) -> None:
        """Wait (bounded) until at least ``count`` envelopes are confirmed, while :meth:`run` posts."""
        async with asyncio.timeout(120):
            while len(self.confirmed) < count:
                await asyncio.sleep(0.02)  # polling the list run() appends to, not a synchronisation
