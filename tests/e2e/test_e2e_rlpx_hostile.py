"""End to end (issue 4): hostile input against a running edge peer while a good peer keeps being served.

Random bytes and a truncated handshake on the RLPx port, undecodable Messages payloads and malformed
envelopes, unknown message codes, a flood of 0x7e requests (garbage, invalid and valid), an oversized packet —
each is refused, ignored or counted (metrics scraped over HTTP), the hostile session is dropped where the
protocol says so, memory stays bounded, and a good requester walks its history correctly throughout.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from devp2p.config import ServerConfig, SessionConfig
from mailmeshcli.compose import compose_envelope
from tests.e2e.e2e_rlpx_support import Mesh, archived, eventually, mesh_fixture
from wakucodec import rlp
from wakucodec.bloom import topics_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requests import encode_p2p_request
from wakucodec.responses import Completion
from wakucodec.symmetric import key_from_password
from wakunode.client import WakuClient
from wakunode.constants import MESSAGES_CODE, P2P_REQUEST_CODE

T = TypeVar("T")
TOPIC = bytes.fromhex("badc0de1")
COUNT = 600
MAX_MESSAGE = 64 * 1024
FLOOD = 400
CLIENT = ServerConfig(listen=False, session=SessionConfig(handshake_timeout=3.0))


def run(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    yield from mesh_fixture(
        tmp_path_factory.mktemp("rlpx-hostile"),
        replicas=1,
        edge_env={
            "EDGE_MAX_MESSAGE_SIZE": str(MAX_MESSAGE),
            "EDGE_HANDSHAKE_TIMEOUT_SECONDS": "2",
            "EDGE_RATE_LIMITER": "true",  # count floods (tolerance 0: never drop for it)
            "EDGE_MIN_POW": "0",
        },
    )


@pytest.fixture(scope="module")
def stored(mesh: Mesh) -> list[Envelope]:
    base = int(time.time()) - COUNT - 60
    envelopes = [
        compose_envelope(
            i.to_bytes(4, "big") * 8, topic=TOPIC, ttl=3600, pow_target=0, encryption=None, sent=base + i
        )
        for i in range(COUNT)
    ]

    async def publish() -> None:
        async with WakuClient(server_config=CLIENT) as client:
            info = await client.connect(mesh.edges[0].enode)
            for i in range(0, COUNT, 100):
                await client.post(info.pubkey, envelopes[i : i + 100])

    run(publish())
    deadline = time.monotonic() + 60
    while archived(mesh.get("history").address, [e.hash for e in envelopes]) < COUNT:
        assert time.monotonic() < deadline, "not archived in time"
        time.sleep(0.05)  # polling the archive (bounded), not synchronisation by sleeping
    return envelopes


def _devp2p_port(mesh: Mesh) -> int:
    return int(mesh.edges[0].enode.rsplit(":", 1)[1])


def _closed_by_server(port: int, payload: bytes, timeout: float = 10.0) -> bool:
    """Send ``payload`` on a raw TCP connection; True when the server closes it (EOF or reset) in time."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(payload)
        conn.settimeout(timeout)
        try:
            while conn.recv(4096):
                pass  # whatever it sends (nothing, for a bad auth) until it closes
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return True


def test_random_bytes_and_truncated_handshakes_are_dropped(mesh: Mesh) -> None:
    port = _devp2p_port(mesh)
    assert _closed_by_server(port, os.urandom(600))
    assert _closed_by_server(port, b"\x01\x2c" + os.urandom(50))  # a size prefix, then silence: 2 s timeout
    assert _closed_by_server(
        port, b"\xff\xff" + os.urandom(20)
    )  # claims 64 KiB > 4 KiB limit: refused unread

    def rejected() -> dict[str, float]:
        return {
            dict(labels)["reason"]: value
            for (name, labels), value in mesh.edges[0].metrics().items()
            if name == "devp2p_rejected_connections_total"
        }

    eventually(
        lambda: sum(rejected().values()) >= 3 and rejected().get("handshake_timeout", 0) >= 1, "rejections"
    )


async def _good_walk(enode: str, expected: list[Envelope], rounds: int) -> int:
    async with WakuClient(server_config=CLIENT) as client:
        info = await client.connect(enode)
        now = int(time.time())
        request = HistoryRequest(0, now, None, (TOPIC,), 100)
        for _ in range(rounds):
            walk = client.follow_cursor(
                info.pubkey, request, Dialect.STATUS_ENVELOPE, password="status-offline-inbox"
            )
            got = [e async for e in walk]
            assert [e.hash for e in got] == [e.hash for e in expected]
            assert len(walk.pages) >= 6
        return rounds


class Completions:
    """A P2PListener that counts 0x7d packets (and error ones)."""

    def __init__(self) -> None:
        self.count = self.errors = 0
        self._changed = asyncio.Event()

    def on_p2p_envelopes(self, pubkey: bytes, envelopes: list[Envelope]) -> None:
        pass

    def on_p2p_complete(self, pubkey: bytes, completion: Completion) -> None:
        self.count += 1
        self.errors += completion.error is not None
        self._changed.set()

    async def wait(self, count: int) -> None:
        while self.count < count:
            self._changed.clear()
            await self._changed.wait()


async def _hostile(enode: str) -> dict[str, int]:
    """Malformed traffic, then a request flood; returns what was sent."""
    sent = {"messages": 0, "requests": 0}
    async with WakuClient(server_config=CLIENT) as client:
        info = await client.connect(enode)
        pk = info.pubkey
        bad_envelope = rlp.encode([[1, 2, b"abc", b"data", 0]])  # 3-byte topic
        for payload in (os.urandom(200), b"\xc0", bad_envelope, rlp.encode([b"not a list"]), b"\xf8\xff"):
            await client.node.send_packet(pk, MESSAGES_CODE, payload)
            sent["messages"] += 1
        await client.node.send_packet(pk, 50, b"\xc0")  # unknown code: ignored
        key = key_from_password("status-offline-inbox")
        heavy = HistoryRequest(0, 0, topics_to_bloom([TOPIC]), (), 50)
        forms = [
            lambda: os.urandom(120),
            lambda: (
                encode_p2p_request(HistoryRequest(200, 100, None, (TOPIC,)), Dialect.STATUS_PLAIN).payload
            ),
            lambda: encode_p2p_request(heavy, Dialect.SPEC_5, symmetric_key=key).payload,
        ]
        answers = Completions()
        client.node.p2p_listener = answers  # count the 0x7d we are owed instead of matching requests
        for i in range(FLOOD):
            await client.node.send_packet(pk, P2P_REQUEST_CODE, forms[i % 3]())
            sent["requests"] += 1
        owed = 2 * FLOOD // 3  # garbage gets no answer; invalid and valid requests each get one 0x7d
        await asyncio.wait_for(answers.wait(owed), 90)
        sent["errors"] = answers.errors
        still_connected = client.node.session(pk) is not None
        sent["connected"] = int(still_connected)
    return sent


def test_flood_and_malformed_input_while_a_good_peer_is_served(mesh: Mesh, stored: list[Envelope]) -> None:
    edge = mesh.edges[0]
    rss_before = edge.rss_kib()
    expected = sorted(stored, key=lambda e: (e.sent, e.hash))

    async def scenario() -> tuple[int, dict[str, int]]:
        good = asyncio.create_task(_good_walk(edge.enode, expected, rounds=3))
        hostile = asyncio.create_task(asyncio.wait_for(_hostile(edge.enode), 120))
        return await asyncio.wait_for(good, 120), await hostile

    rounds, sent = run(scenario())
    assert rounds == 3 and sent["requests"] == FLOOD and sent["connected"] == 1
    assert sent["errors"] == FLOOD // 3  # lower > upper: ERROR= each; the valid ones completed
    assert edge.metric("waku_envelopes_rejected_total", reason="invalid_data") >= 4
    assert edge.metric("waku_ignored_packets_total", reason="unknown_code") >= 1
    assert edge.metric("mailserver_delivery_failures_total", type="validation") >= FLOOD // 3
    assert edge.metric("mailserver_delivery_attempts_total") >= FLOOD
    assert edge.metric("waku_rate_limits_exceeded_total", type="peer_id") > 0
    assert edge.running()
    assert edge.rss_kib() - rss_before < 200 * 1024, "edge peer memory grew by more than 200 MiB"


def test_oversized_packet_disconnects_only_that_peer(mesh: Mesh, stored: list[Envelope]) -> None:
    edge = mesh.edges[0]

    async def scenario() -> tuple[bool, int]:
        async with WakuClient(server_config=CLIENT) as good, WakuClient(server_config=CLIENT) as bad:
            good_info = await good.connect(edge.enode)
            bad_info = await bad.connect(edge.enode)
            peer = bad.server.get_peer(bad_info.pubkey)
            assert peer is not None
            await bad.node.send_packet(
                bad_info.pubkey, MESSAGES_CODE, rlp.encode([os.urandom(MAX_MESSAGE + 10)])
            )
            end = await asyncio.wait_for(peer.wait_closed(), 10)
            request = HistoryRequest(0, 0, None, (TOPIC,), 50)
            page = good.request_history(
                good_info.pubkey, request, Dialect.SPEC_6_TOPICS, password="status-offline-inbox"
            )
            got = [e async for e in page]
            return end.reason == 0x10, len(got)

    dropped, served = run(scenario())
    assert dropped and served == 50
    eventually(lambda: edge.metric("waku_peer_disconnects_total", cause="oversized") >= 1, "oversized count")
    eventually(
        lambda: edge.metric("devp2p_disconnects_sent_total", reason="subprotocol_error") >= 1, "0x10 sent"
    )
