"""history-query's callers over two replicas, one of which refuses every call UNAVAILABLE (what a replica in
graceful shutdown answers new calls): the edge peer's Query, the send service's and the subscription service's
Lookup are reads, retried by their channels on the other replica, so every call is answered.

Before their channels carried a retry policy, about every other call failed: round-robin gives the refusing
replica its turn, and the refusal reached the Waku peer as 0x7d ``ERROR=`` or the store check as a failure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from services.edge_peer.clients import HistoryClient
from services.send.clients import HistoryLookup
from services.subscription.clients import Channels, LookupClient
from tests.integration.edge_peer.edge_peer_support import history_query, start_fake
from tests.unit.send.send_fixtures import entry
from wakunode.ports import HistoryComplete

STORED = b"\x07" * 32
CURSOR = b"\x42" * 36


@dataclass
class Replica(history_pb2_grpc.HistoryQueryServiceServicer):
    """A history replica that answers (an empty page, its cursor; STORED is archived) or refuses."""

    refuse: bool
    calls: list[str] = field(default_factory=list)

    async def Query(self, request: Any, context: Any) -> AsyncIterator[history_pb2.HistoryQueryResponse]:
        self.calls.append("Query")
        if self.refuse:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "shutting down")
        yield history_pb2.HistoryQueryResponse(complete=history_pb2.HistoryComplete(next_cursor=CURSOR))

    async def Lookup(self, request: Any, context: Any) -> history_pb2.LookupResponse:
        self.calls.append("Lookup")
        if self.refuse:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "shutting down")
        stored = [h for h in request.envelope_hashes if h == STORED]
        return history_pb2.LookupResponse(stored_envelope_hashes=stored)

    async def WatchServed(
        self, request: Any, context: Any
    ) -> AsyncIterator[history_pb2.WatchServedResponse]:  # not called here
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not a served-history source")
        yield history_pb2.WatchServedResponse()


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[Replica, str]]:
    """A refusing replica and a working one; the address setting naming both."""
    refusing, working = Replica(refuse=True), Replica(refuse=False)
    add = history_pb2_grpc.add_HistoryQueryServiceServicer_to_server
    servers = [await start_fake(refusing, add), await start_fake(working, add)]
    try:
        yield refusing, ",".join(address for _, address in servers)
    finally:
        for server, _ in servers:
            await server.stop(0)


async def test_the_edge_peers_queries_go_to_the_replica_that_answers(replicas: tuple[Replica, str]) -> None:
    refusing, target = replicas
    client = HistoryClient.connect(target, timeout_s=30, max_message_bytes=1 << 20)
    try:
        while refusing.calls.count("Query") < 3:  # round-robin has given the refusing replica turns
            answers = [item async for item in client.query(history_query())]
            assert answers == [HistoryComplete(CURSOR, b"")]
    finally:
        await client.close()


async def test_the_send_services_store_checks_are_answered(replicas: tuple[Replica, str]) -> None:
    refusing, target = replicas
    lookup = HistoryLookup(target, call_timeout_s=30)
    sent = dataclasses.replace(entry(), envelope_hash=STORED)
    try:
        while refusing.calls.count("Lookup") < 3:
            assert await lookup.holds(sent)
    finally:
        await lookup.close()


async def test_the_subscription_services_store_checks_are_answered(replicas: tuple[Replica, str]) -> None:
    refusing, target = replicas
    channels = Channels()
    lookup = LookupClient(channels, target, timeout_s=30)
    try:
        while refusing.calls.count("Lookup") < 3:
            assert await lookup.stored([STORED, b"\x08" * 32]) == {STORED}
    finally:
        await channels.close()
