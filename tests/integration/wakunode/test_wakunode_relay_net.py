"""Envelopes relayed between our nodes over loopback, honouring bloom, topic interest and PoW
(protocol-notes §3.8); multi-hop relay; confirmations over the wire (§3.6)."""

from __future__ import annotations

import time

from tests.integration.wakunode.support import FAST, envelopes, link, running_client, running_node, wait_until
from wakucodec.bloom import topic_to_bloom
from wakucodec.keccak import keccak256
from wakucodec.pow import calculate_pow, seal
from wakunode.constants import ENVELOPE_TIME_NOT_SYNCED
from wakunode.publish import PublishStatus


async def test_relay_honours_bloom_topic_interest_and_pow() -> None:
    async with (
        running_node(FAST) as source,
        running_node(FAST) as full,
        running_node(FAST, bloom=topic_to_bloom(b"aaaa")) as by_bloom,
        running_node(FAST, topic_interest=(b"bbbb",)) as by_interest,
        running_node(FAST, pow_requirement=1.0) as by_pow,
    ):
        for target in (full, by_bloom, by_interest, by_pow):
            await link(target, source)
        weak = envelopes(5, topic=b"aaaa") + envelopes(5, topic=b"bbbb", first=5)
        now = int(time.time())
        strong = seal(now + 300, 300, b"cccc", b"strong envelope", target_pow=2.0, work_time_s=10)
        assert calculate_pow(strong) >= 1.0 and all(calculate_pow(e) < 1.0 for e in weak)
        results = await source.node.publish([*weak, strong], relay_timeout=5.0)
        assert all(r.status is PublishStatus.PUBLISHED for r in results)
        assert [r.relayed_to for r in results] == [
            2
        ] * 11  # the full node + the one restricted node admitting it
        await full.sink.wait_for(11)
        # A marker every node admits, sent last: once it arrived, nothing sent before it is still in flight.
        marker = seal(now + 300, 300, b"aaaa", b"marker", target_pow=2.0, work_time_s=10)
        await source.node.publish([marker], relay_timeout=5.0)
        await by_bloom.sink.wait_for(6)
        await by_pow.sink.wait_for(2)
        assert {e.topic for e in by_bloom.sink.envelopes} == {b"aaaa"} and len(by_bloom.sink.envelopes) == 6
        assert {e.hash for e in by_pow.sink.envelopes} == {strong.hash, marker.hash}
        interest_marker = seal(now + 300, 300, b"bbbb", b"marker", target_pow=2.0, work_time_s=10)
        await source.node.publish([interest_marker], relay_timeout=5.0)
        await by_interest.sink.wait_for(6)
        assert {e.topic for e in by_interest.sink.envelopes} == {b"bbbb"}
        assert len(by_interest.sink.envelopes) == 6
        for node in (by_bloom, by_interest, by_pow):  # nothing non-matching was even sent to them
            assert node.node.metrics.envelopes_cache_failures_total == {}


async def test_multi_hop_relay_and_no_echo() -> None:
    async with running_node(FAST) as a, running_node(FAST) as b, running_node(FAST) as c:
        await link(a, b)
        await link(c, b)
        batch = envelopes(50)
        await a.node.publish(batch)
        await c.sink.wait_for(50)
        assert [e.hash for e in c.sink.envelopes] == [e.hash for e in batch]
        assert c.sink.calls[0].peer_id == keccak256(b.pubkey)  # the node ID of the peer it came from
        await wait_until(lambda: b.node.metrics.envelopes_sent_total == 50, what="b forwarded to c")
        assert a.node.metrics.envelopes_received_total == 50  # published locally only, no echo back from b
        assert b.node.metrics.envelopes_cached_total["miss"] == 50


async def test_republish_is_already_known() -> None:
    async with running_node(FAST) as a, running_node(FAST) as b:
        await link(a, b)
        batch = envelopes(3)
        first = await a.node.publish(batch, relay_timeout=5.0)
        again = await a.node.publish(batch, relay_timeout=0.2)
        assert [r.status for r in first] == [PublishStatus.PUBLISHED] * 3
        assert [(r.status, r.relayed_to) for r in again] == [(PublishStatus.ALREADY_KNOWN, 1)] * 3


async def test_confirmations_over_the_wire() -> None:
    async with running_node(FAST, confirmations=True) as server, running_client() as client:
        info = await client.connect(server.enode)
        assert info.confirmations_enabled
        good = envelopes(2)
        result = await client.post(server.pubkey, good, confirm_timeout=5.0)
        assert result.response is not None and result.response.batch_hash == result.batch_hash
        assert result.response.errors == ()
        future = envelopes(1, sent=int(time.time()) + 600)
        refused = await client.post(server.pubkey, future, confirm_timeout=5.0)
        assert refused.response is not None
        [error] = refused.response.errors
        assert error.envelope_hash == future[0].hash and error.code == ENVELOPE_TIME_NOT_SYNCED
        assert error.description == "envelope from future"
        await server.sink.wait_for(2)
