"""The edge peer's /metrics is scraped from the metrics server's thread while the event loop changes the
node's peer tables: the collector must read them on the loop (found by the soak, docs/soak.md — scrapes
failed with "dictionary changed size during iteration" under hostile connection churn)."""

from __future__ import annotations

import asyncio
import threading

from prometheus_client import generate_latest

from services.edge_peer.logic import PeerView
from tests.integration.edge_peer.edge_peer_support import Edge


async def test_a_scrape_from_another_thread_reads_the_node_on_its_event_loop(edge: Edge) -> None:
    readers: list[int] = []
    peers = edge.edge.peers

    def recording() -> list[PeerView]:
        readers.append(threading.get_ident())
        return peers()

    edge.edge.peers = recording  # type: ignore[method-assign]
    text = await asyncio.to_thread(lambda: generate_latest(edge.registry).decode())
    assert "p2p_peers 0.0" in text
    assert readers == [threading.get_ident()]  # the loop's thread (this test runs on it), not the scraper's
