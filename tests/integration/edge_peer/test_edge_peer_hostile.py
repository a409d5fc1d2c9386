"""Peers dropped for oversized packets over loopback RLPx: what the edge peer keeps of them (nothing), how
their unfinished history requests are counted (once each), and devp2p's own size limit."""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest

from devp2p.errors import DisconnectReason
from tests.integration.edge_peer.edge_peer_support import (
    Edge,
    FakeHistory,
    FakeIngest,
    envelopes,
    request_client,
    start_edge,
    stop_edge,
    wait_until,
)
from tests.leak_support import cycle_collector_off
from wakucodec import rlp
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requests import encode_p2p_request
from wakunode.constants import MESSAGES_CODE, P2P_REQUEST_CODE

TOPIC = b"\xaa\x00\x00\x01"
MAX_MESSAGE = 64 * 1024
PEERS = 6


@pytest.fixture
async def small_edge(
    tmp_path: Path, ingest: tuple[FakeIngest, str], history: tuple[FakeHistory, str]
) -> AsyncIterator[Edge]:
    handle = await start_edge(tmp_path, ingest[1], history[1], EDGE_MAX_MESSAGE_SIZE=str(MAX_MESSAGE))
    try:
        yield handle
    finally:
        await stop_edge(handle)


def asked(fake: FakeHistory, count: int) -> bool:
    """Whether history-query got ``count`` queries."""
    return len(fake.requests) == count


def metrics(edge: Edge, name: str, label: str) -> dict[str, float]:
    """``{label value: sample}`` of one labelled counter."""
    return {
        sample.labels[label]: sample.value
        for family in edge.registry.collect()
        for sample in family.samples
        if sample.name == name and sample.value
    }


async def test_peers_dropped_mid_answer_for_oversized_packets_leave_nothing_behind(
    small_edge: Edge, history: tuple[FakeHistory, str]
) -> None:
    """Each peer has a history answer in flight (history-query holds its completion) when it sends a packet
    just over the max message size: it gets 0x10, its session state is freed by reference counting alone
    (the edge peer's RSS grew ~0.8 MiB per such peer while cycles kept them until a full collection), and
    its request is counted exactly once: peer_gone, and abandoned at history-query."""
    edge = small_edge
    fake, _ = history
    fake.store.add(envelopes(30, topic=TOPIC))
    fake.hold = asyncio.Event()
    now = int(time.time())
    request = encode_p2p_request(HistoryRequest(now - 60, now + 60, None, (TOPIC,), 20), Dialect.STATUS_PLAIN)
    oversized = rlp.encode([os.urandom(MAX_MESSAGE + 10)])
    server_side: list[weakref.ref[object]] = []
    with cycle_collector_off():
        for i in range(PEERS):
            async with request_client() as client:
                info = await client.connect(edge.enode)
                ours = client.server.get_peer(info.pubkey)
                assert ours is not None
                theirs = edge.edge.server.get_peer(client.server.pubkey)
                assert theirs is not None
                server_side.append(weakref.ref(theirs))
                server_side += [weakref.ref(s) for s in edge.edge.node._sessions.values() if s.peer is theirs]
                del theirs
                await client.node.send_packet(info.pubkey, P2P_REQUEST_CODE, request.payload)
                await wait_until(partial(asked, fake, i + 1), what="history asked")
                await client.node.send_packet(info.pubkey, MESSAGES_CODE, oversized)
                end = await asyncio.wait_for(ours.wait_closed(), 10)
                assert end.reason == DisconnectReason.SUBPROTOCOL_ERROR and end.remote
                del ours
        await wait_until(lambda: not edge.edge.server.peers, what="sessions torn down")
        await wait_until(
            lambda: all(ref() is None for ref in server_side), what="peers and sessions freed without gc"
        )
    assert len(server_side) == 3 * PEERS  # per peer: the devp2p peer, its waku and its shh session
    assert edge.metric("waku_peer_disconnects_total", {"cause": "oversized"}) == PEERS
    assert edge.metric("devp2p_disconnects_sent_total", {"reason": "subprotocol_error"}) == PEERS
    await wait_until(
        lambda: sum(metrics(edge, "edge_history_requests_total", "outcome").values()) == PEERS,
        what="history outcomes",
    )
    assert metrics(edge, "edge_history_requests_total", "outcome") == {"abandoned": PEERS}
    assert metrics(edge, "mailserver_delivery_failures_total", "type") == {"peer_gone": PEERS}
    assert edge.metric("mailserver_delivery_attempts_total") == PEERS


async def test_a_packet_far_over_the_limit_is_refused_by_devp2p_unread(small_edge: Edge) -> None:
    """Up to the devp2p margin over the max message size wakunode answers (0x10, counted oversized); a
    larger packet never gets past devp2p's frame size check (0x02), and the next peer is served."""
    edge = small_edge
    huge = rlp.encode([os.urandom(4 * MAX_MESSAGE)])
    async with request_client() as client:
        info = await client.connect(edge.enode)
        ours = client.server.get_peer(info.pubkey)
        assert ours is not None
        await client.node.send_packet(info.pubkey, MESSAGES_CODE, huge)
        end = await asyncio.wait_for(ours.wait_closed(), 10)
    assert end.reason == DisconnectReason.PROTOCOL_ERROR and end.remote
    assert edge.metric("devp2p_errors_total", {"class": "MessageTooLarge"}) == 1
    assert edge.metric("waku_peer_disconnects_total", {"cause": "oversized"}) == 0
    async with request_client() as client:
        await client.connect(edge.enode)
        assert edge.edge.server.get_peer(client.server.pubkey) is not None
