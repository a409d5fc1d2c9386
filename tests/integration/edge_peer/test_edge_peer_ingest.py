"""The Ingest stream over real gRPC: re-send after a failed stream, back-pressure and counted drops while
ingest is down, delivery once it is back; with confirmations, nothing dropped is acknowledged."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from mailmesh.history.v1 import history_pb2_grpc
from mailmesh.ingest.v1 import ingest_pb2_grpc
from tests.integration.edge_peer.edge_peer_support import (
    Edge,
    FakeHistory,
    FakeIngest,
    envelopes,
    request_client,
    start_edge,
    start_fake,
    stop_edge,
    wait_until,
)
from wakunode.constants import ENVELOPE_OTHER_ERROR


async def test_unacknowledged_batches_are_resent_after_a_stream_failure(
    edge: Edge, ingest: tuple[FakeIngest, str]
) -> None:
    fake, _ = ingest
    fake.fail_after, fake.failures_left = 1, 2  # two streams die after their first batch, unacknowledged
    batch = envelopes(30)
    async with request_client() as client:
        info = await client.connect(edge.enode)
        for i in range(0, 30, 10):
            await client.post(info.pubkey, batch[i : i + 10])
        await wait_until(lambda: set(fake.hashes) == {e.hash for e in batch}, what="every envelope at ingest")
    await wait_until(lambda: edge.edge.forwarder.buffered_envelopes == 0, what="buffer drained")
    assert fake.streams >= 3
    assert edge.metric("edge_ingest_batches_resent_total") >= 1
    assert edge.metric("edge_ingest_stream_failures_total", {"error": "Unavailable"}) == 2
    assert edge.metric("edge_ingest_dropped_envelopes_total", {"reason": "buffer_full"}) == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_ingest_down_pushes_back_counts_drops_and_delivers_when_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = _free_port()
    history = FakeHistory()
    history_server, history_addr = await start_fake(
        history, history_pb2_grpc.add_HistoryQueryServiceServicer_to_server
    )
    edge = await start_edge(
        tmp_path,
        f"127.0.0.1:{port}",
        history_addr,
        EDGE_INGEST_BUFFER_ENVELOPES="20",
        EDGE_INGEST_BUFFER_WAIT_SECONDS="0.2",
    )
    fake = FakeIngest()
    ingest_server = None
    try:
        batch = envelopes(50)
        caplog.set_level(logging.WARNING, logger="services.edge_peer.forwarder")
        async with request_client() as client:
            info = await client.connect(edge.enode)
            for i in range(0, 50, 10):
                await client.post(info.pubkey, batch[i : i + 10])
            dropped = {"reason": "buffer_full"}
            await wait_until(
                lambda: edge.metric("edge_ingest_dropped_envelopes_total", dropped) == 30,
                what="30 counted drops",
            )
            assert edge.metric("edge_ingest_buffered_envelopes") == 20
            assert edge.metric("edge_ingest_backpressure_waits_total") == 3
            assert edge.metric("waku_envelopes_validated_total") == 50  # the relay itself took everything
            assert any("not forwarded (buffer_full" in r.getMessage() for r in caplog.records)
            ingest_server, _ = await start_fake(
                fake, ingest_pb2_grpc.add_IngestServiceServicer_to_server, port
            )
            await wait_until(lambda: len(fake.hashes) == 20, timeout=15, what="buffered envelopes delivered")
        assert sorted(fake.hashes) == sorted(e.hash for e in batch[:20])
        await wait_until(lambda: edge.metric("edge_ingest_buffered_envelopes") == 0, what="acks processed")
    finally:
        await stop_edge(edge)
        if ingest_server is not None:
            await ingest_server.stop(None)
        await history_server.stop(None)


async def test_with_confirmations_nothing_dropped_is_acknowledged(tmp_path: Path) -> None:
    """Found by the soak (docs/soak.md): with EDGE_CONFIRMATIONS the Batch Ack used to go out before the
    envelopes were handed to the ingest buffer, so those then dropped (buffer_full) had been acknowledged.
    Now a packet whose envelopes could not be buffered is answered with an error for each of them, the
    acknowledged ones all reach ingest, and the refused ones are taken when the peer sends them again."""
    port = _free_port()
    history = FakeHistory()
    history_server, history_addr = await start_fake(
        history, history_pb2_grpc.add_HistoryQueryServiceServicer_to_server
    )
    edge = await start_edge(
        tmp_path,
        f"127.0.0.1:{port}",
        history_addr,
        EDGE_CONFIRMATIONS="true",
        EDGE_INGEST_BUFFER_ENVELOPES="20",
        EDGE_INGEST_BUFFER_WAIT_SECONDS="0.2",
    )
    fake = FakeIngest()
    ingest_server = None
    try:
        batch = envelopes(50)
        async with request_client() as client:
            info = await client.connect(edge.enode)
            refused: list[bytes] = []
            for i in range(0, 50, 10):
                result = await client.post(info.pubkey, batch[i : i + 10], confirm_timeout=30)
                assert result.response is not None, "every packet is confirmed"
                assert all(e.code == ENVELOPE_OTHER_ERROR for e in result.response.errors)
                refused += [e.envelope_hash for e in result.response.errors]
            assert refused == [e.hash for e in batch[20:]]  # the buffer holds 20; the rest never got in
            assert edge.metric("edge_ingest_dropped_envelopes_total", {"reason": "buffer_full"}) == 30
            ingest_server, _ = await start_fake(
                fake, ingest_pb2_grpc.add_IngestServiceServicer_to_server, port
            )
            await wait_until(lambda: len(fake.hashes) == 20, timeout=15, what="acknowledged ones delivered")
            for i in range(20, 50, 10):  # sent again: taken and acknowledged this time
                result = await client.post(info.pubkey, batch[i : i + 10], confirm_timeout=30)
                assert result.response is not None and result.response.errors == ()
            await wait_until(lambda: len(fake.hashes) == 50, timeout=15, what="the rest delivered")
        assert sorted(fake.hashes) == sorted(e.hash for e in batch)
    finally:
        await stop_edge(edge)
        if ingest_server is not None:
            await ingest_server.stop(None)
        await history_server.stop(None)


async def test_shutdown_flushes_the_buffer(edge: Edge, ingest: tuple[FakeIngest, str]) -> None:
    import asyncio

    fake, _ = ingest
    fake.gate = asyncio.Event()  # acks wait: envelopes stay buffered
    async with request_client() as client:
        info = await client.connect(edge.enode)
        await client.post(info.pubkey, envelopes(5))
        await wait_until(lambda: edge.edge.forwarder.buffered_envelopes == 5, what="buffered")
    fake.gate.set()
    await edge.edge.close(flush_timeout=5)
    assert len(fake.hashes) == 5 and edge.edge.forwarder.buffered_envelopes == 0
    assert edge.metric("edge_ingest_dropped_envelopes_total", {"reason": "shutdown"}) == 0
