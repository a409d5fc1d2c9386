"""Hostile peers over loopback: each input is ignored and counted, or ends that session with the right
reason — and a well-behaved peer keeps being served throughout."""

from __future__ import annotations

import asyncio
import time

from devp2p.errors import DisconnectReason
from tests.integration.wakunode.support import (
    FAST,
    Running,
    envelopes,
    link,
    raw_peer,
    running_client,
    running_node,
    wait_until,
    waku1_status,
)
from wakucodec import rlp
from wakucodec.envelope import encode_envelopes
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requests import encode_p2p_request
from wakucodec.responses import decode_completion
from wakunode import constants as c
from wakunode.config import MailserverConfig, RateLimiterConfig
from wakunode.mailserver import RATE_LIMIT_EXCEEDED
from wakunode.memory import MemoryHistory
from wakunode.status_options import pow_to_bits

NOW = int(time.time())
ARCHIVE = envelopes(20, topic=b"aaaa", sent=NOW - 100)
QUERY = HistoryRequest(lower=NOW - 200, upper=NOW, topics=(b"aaaa",), limit=5)


async def assert_still_serves(server: Running) -> None:
    """A fresh, well-behaved client gets history and the relay still accepts envelopes."""
    async with running_client() as client:
        await client.connect(server.enode)
        page = client.request_history(server.pubkey, QUERY, Dialect.STATUS_PLAIN, timeout=10)
        assert len([e async for e in page]) == 5
    async with running_node(FAST) as good:
        await link(good, server)
        before = len(server.sink.envelopes)
        batch = envelopes(3, topic=b"good", first=1000)
        await good.node.publish(batch)
        await server.sink.wait_for(before + 3)


async def test_malformed_envelopes_are_counted_and_the_peer_kept() -> None:
    async with running_node(FAST, MemoryHistory(ARCHIVE)) as server, raw_peer(server) as raw:
        await raw.status(waku1_status(pow_requirement=0.0))
        metrics = server.node.metrics
        await raw.send(c.MESSAGES_CODE, b"\x01\x02\x03")  # not RLP
        await raw.send(c.MESSAGES_CODE, rlp.encode([[1, 2, 3]]))  # a 3-item "envelope"
        await raw.send(c.MESSAGES_CODE, encode_envelopes(envelopes(2, sent=NOW - 1000)))  # very old
        await raw.send(c.STATUS_UPDATE_CODE, b"\xff\xff")  # bad Status Update
        await raw.send(77, b"\x00" * 100)  # unknown code
        await raw.send(c.STATUS_CODE, b"garbage")  # second Status: ignored
        valid = envelopes(1, topic=b"late")
        await raw.send(c.MESSAGES_CODE, encode_envelopes(valid))
        await server.sink.wait_for(1)
        assert server.sink.envelopes[0].hash == valid[0].hash
        assert metrics.envelopes_rejected_total["invalid_data"] == 2
        assert metrics.envelopes_rejected_total["invalid_settings_changed"] == 1
        assert metrics.envelopes_cache_failures_total["very_old"] == 2
        assert metrics.ignored_packets == {"unknown_code": 1, "second_status": 1}
        assert not raw.peer.is_closed and len(server.node.peers()) == 1
        await assert_still_serves(server)


async def test_bad_status_disconnects_with_subprotocol_error() -> None:
    async with running_node(FAST, MemoryHistory(ARCHIVE)) as server:
        for status in (
            b"\x01\x02",
            rlp.encode([[0, pow_to_bits(float("inf"))]]),
            rlp.encode([[1, b"\x00" * 7]]),
        ):
            async with raw_peer(server) as raw:
                await raw.status(status)
                end = await asyncio.wait_for(raw.peer.wait_closed(), 5)
                assert (end.reason, end.remote) == (DisconnectReason.SUBPROTOCOL_ERROR, True)
        async with raw_peer(server) as raw:
            await raw.send(c.MESSAGES_CODE, encode_envelopes(envelopes(1)))  # before Status
            end = await asyncio.wait_for(raw.peer.wait_closed(), 5)
            assert end.reason == DisconnectReason.SUBPROTOCOL_ERROR
        assert server.node.metrics.peer_disconnects["bad_status"] == 4
        await assert_still_serves(server)


async def test_missing_status_times_out() -> None:
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), status_timeout=0.2) as server,
        raw_peer(server) as raw,
    ):
        end = await asyncio.wait_for(raw.peer.wait_closed(), 5)
        assert end.reason == DisconnectReason.SUBPROTOCOL_ERROR
        assert server.node.metrics.peer_disconnects["status_timeout"] == 1
        await assert_still_serves(server)


async def test_oversized_packet_disconnects() -> None:
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), max_message_size=4096) as server,
        raw_peer(server) as raw,
    ):
        await raw.status(waku1_status())
        await raw.send(c.MESSAGES_CODE, encode_envelopes(envelopes(1, size=2048)))  # fits
        await server.sink.wait_for(1)
        await raw.send(c.MESSAGES_CODE, encode_envelopes(envelopes(3, size=2048, first=10)))  # > 4096
        end = await asyncio.wait_for(raw.peer.wait_closed(), 5)
        assert end.reason == DisconnectReason.SUBPROTOCOL_ERROR
        assert server.node.metrics.peer_disconnects["oversized"] == 1
        assert len(server.sink.envelopes) == 1
        await assert_still_serves(server)


async def test_request_flood_gets_errors_then_disconnect() -> None:
    limits = RateLimiterConfig(packets_per_ip=0, bytes_per_ip=0, packets_per_peer=5, tolerance=3)
    mailserver = MailserverConfig(request_rate_limit=30.0)
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), rate_limiter=limits, mailserver=mailserver) as server,
        raw_peer(server) as raw,
    ):
        await raw.status(waku1_status())
        answers: list[str | None] = []
        for _ in range(50):  # bounded: the tolerance ends it after a handful
            if raw.peer.is_closed:
                break
            request = encode_p2p_request(QUERY, Dialect.STATUS_PLAIN)
            try:
                await raw.send(c.P2P_REQUEST_CODE, request.payload)
                answers.append(decode_completion(await raw.expect(c.P2P_REQUEST_COMPLETE_CODE, 5)).error)
            except Exception:
                break
        end = await asyncio.wait_for(raw.peer.wait_closed(), 5)
        assert end.reason == DisconnectReason.SUBPROTOCOL_ERROR
        assert answers[0] is None and RATE_LIMIT_EXCEEDED in answers[1:]
        assert len(answers) < 10
        assert server.node.metrics.peer_disconnects["rate_limit"] == 1
        assert server.node.metrics.rate_limits_exceeded_total["peer_id"] == 3
        assert server.node.mailserver_metrics.delivery_failures_total["peer_req_limit"] >= 1
        await wait_until(lambda: server.node.peers() == [], what="flooding session removed")
        await assert_still_serves(server)


async def test_garbage_requests_are_counted_and_answered_when_identifiable() -> None:
    async with running_node(FAST, MemoryHistory(ARCHIVE)) as server, raw_peer(server) as raw:
        await raw.status(waku1_status())
        await raw.send(c.P2P_REQUEST_CODE, b"\x83abc")  # neither an envelope nor a MessagesRequest
        await raw.send(
            c.P2P_REQUEST_CODE, rlp.encode([b"x" * 32, 1, 2, 5, b"", b"", []])
        )  # no bloom, no topics
        refused = decode_completion(await raw.expect(c.P2P_REQUEST_COMPLETE_CODE))
        assert refused.error == "request is invalid: bloom filter and topics is empty"
        assert refused.request_id == b"x" * 32
        await raw.send(c.P2P_MESSAGE_CODE, b"\x01")  # 0x7f from an untrusted peer: ignored
        await wait_until(lambda: server.node.metrics.envelopes_rejected_total["untrusted_p2p"] == 1)
        assert server.node.mailserver_metrics.delivery_failures_total["validation"] == 2
        assert not raw.peer.is_closed
        await assert_still_serves(server)
