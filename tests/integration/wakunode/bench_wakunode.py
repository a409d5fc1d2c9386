"""Throughput figures of the waku layer over real loopback sockets (run by hand, not collected by pytest).

    .venv/bin/python tests/integration/wakunode/bench_wakunode.py [--relay N] [--pages N]

1. relay: node A publishes N 1 KiB envelopes; node B (full node, default 300 ms forwarding) validates and
   hands them to its sink — envelopes/s from the publish call to the last one in B's sink;
2. page: a mailserver with the in-memory backend answers one STATUS_PLAIN request for 1,000 1 KiB envelopes
   — seconds from sending the 0x7e to the 0x7d, measured at the client (target < 1 s);
3. requester: the client follows cursors through N pages of 1,000 — envelopes/s (target ≥ 5,000/s).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time

from devp2p.config import ServerConfig
from devp2p.server import Server
from wakucodec import secp
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakunode.client import WakuClient
from wakunode.config import NodeConfig
from wakunode.memory import MemoryHistory, MemorySink
from wakunode.node import WakuNode

SERVER = ServerConfig(host="127.0.0.1", port=0)


def make(count: int, *, size: int = 1024, sent: int | None = None, topic: bytes = b"bnch") -> list[Envelope]:
    """``count`` envelopes of ``size`` data bytes, 100 per second of sent time from ``sent`` on."""
    start = int(time.time()) - 3600 if sent is None else sent
    return [
        make_envelope(
            expiry=start + i // 100 + 7200,
            ttl=7200,
            topic=topic,
            data=i.to_bytes(4, "big") * (size // 4),
            nonce=i,
        )
        for i in range(count)
    ]


async def bench_relay(count: int) -> float:
    sink = MemorySink()
    a, b = WakuNode(NodeConfig(pow_requirement=0.0)), WakuNode(NodeConfig(pow_requirement=0.0), sink)
    server_a = Server(secp.generate_private_key(), a.protocols, SERVER)
    server_b = Server(secp.generate_private_key(), b.protocols, SERVER)
    batch = make(count, sent=int(time.time()) - count // 100 - 1)  # sent times in the past, 100 per second
    async with a, b, server_a, server_b:
        await server_a.dial(server_b.enode)
        await a.wait_ready(server_b.pubkey, 5)
        await b.wait_ready(server_a.pubkey, 5)
        started = time.perf_counter()
        await a.publish(batch)
        await sink.wait_for(count, timeout=120)
        elapsed = time.perf_counter() - started
    return count / elapsed


async def bench_history(pages: int) -> tuple[float, float]:
    archive = make(1000 * pages)
    history = MemoryHistory(archive)
    node = WakuNode(NodeConfig(), None, history)
    server = Server(secp.generate_private_key(), node.protocols, SERVER)
    node.attach(server)
    request = HistoryRequest(lower=0, upper=int(time.time()) + 60, topics=(b"bnch",), limit=1000)
    async with node, server:
        client = WakuClient(server_config=dataclasses.replace(SERVER, listen=False))
        async with client:
            await client.connect(server.enode)
            single = client.request_history(server.pubkey, request, Dialect.STATUS_PLAIN)
            started = time.perf_counter()
            got = [e async for e in single]
            page_time = time.perf_counter() - started
            assert len(got) == 1000
            started = time.perf_counter()
            walk = client.follow_cursor(server.pubkey, request, Dialect.STATUS_PLAIN)
            total = len([e async for e in walk])
            walk_time = time.perf_counter() - started
            assert total == 1000 * pages, total
    return page_time, total / walk_time


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--relay", type=int, default=20_000, help="envelopes to relay")
    parser.add_argument("--pages", type=int, default=20, help="pages of 1,000 to follow")
    args = parser.parse_args()
    rate = await bench_relay(args.relay)
    print(f"relay A→B: {args.relay} × 1 KiB envelopes, {rate:,.0f} envelopes/s")
    page_time, walk_rate = await bench_history(args.pages)
    print(f"one 1,000-envelope page (1 KiB each): {page_time * 1000:.0f} ms")
    print(f"requester, {args.pages} pages followed by cursor: {walk_rate:,.0f} envelopes/s")


if __name__ == "__main__":
    asyncio.run(main())
