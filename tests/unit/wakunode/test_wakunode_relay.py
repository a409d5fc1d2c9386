"""Relay logic with in-memory peer doubles: handshake, PoW/bloom/topic-interest filters, known-sets,
Status Update, pruning, confirmations and the sink contract. Forwarding rounds are driven by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tests.unit.wakunode.support import NOW, FakePeer, ManualClock, envelope, protocol, sealed
from wakucodec import rlp
from wakucodec.bloom import topic_to_bloom, topics_to_bloom
from wakucodec.envelope import Envelope, decode_envelopes, encode_envelopes
from wakucodec.keccak import keccak256
from wakucodec.pow import calculate_pow
from wakunode import constants as c
from wakunode.config import NodeConfig
from wakunode.confirmations import decode_batch_ack, decode_message_response
from wakunode.memory import MemorySink
from wakunode.node import WakuNode
from wakunode.protocol import encode_status
from wakunode.publish import PublishStatus
from wakunode.relay import NOT_STORED
from wakunode.status_options import StatusOptions, encode_options


async def connect(
    node: WakuNode, options: StatusOptions | None = None, capability: str = "waku/1"
) -> FakePeer:
    peer = FakePeer()
    proto = protocol(node, capability)
    await proto.on_start(peer)
    # PoW requirement 0 unless given: the handshake default (0.001) would hold back unsealed envelopes.
    await proto.handle(
        peer, c.STATUS_CODE, encode_status(proto.flavor, options or StatusOptions(pow_requirement=0))
    )
    return peer


async def forward(node: WakuNode) -> None:
    node.relay.forward_round()
    writes = [s.sending for s in node._sessions.values() if s.sending is not None]
    await asyncio.gather(*writes)


def received(peer: FakePeer) -> list[bytes]:
    return [e.topic for payload in peer.of(c.MESSAGES_CODE) for e in decode_envelopes(payload)]


def node_with(clock: ManualClock | None = None, sink: MemorySink | None = None, **cfg: object) -> WakuNode:
    return WakuNode(NodeConfig(**cfg), sink, clock=clock or ManualClock())  # type: ignore[arg-type]


async def test_handshake_sends_status_and_lists_peer() -> None:
    node = node_with()
    defaults = await connect(node, StatusOptions(light_node=False))
    assert node.peers()[0].pow_requirement == 0.001  # status-go WithDefaults
    await protocol(node).on_stop(defaults, 0)
    peer = await connect(node, StatusOptions(pow_requirement=0.5, light_node=True))
    assert peer.codes() == [c.STATUS_CODE]
    assert peer.of(c.STATUS_CODE)[0] == encode_options(node.status_options)
    [info] = node.peers()
    assert (info.capability, info.pow_requirement, info.light_node, info.bloom) == (
        "waku/1",
        0.5,
        True,
        b"\xff" * 64,
    )
    assert info.connected_since == NOW and not info.trusted


async def test_filters_pow_bloom_topic_interest() -> None:
    node = node_with()
    everyone = await connect(node)  # pow 0, full bloom
    picky_pow = await connect(node, StatusOptions(pow_requirement=1.0))
    picky_bloom = await connect(node, StatusOptions(pow_requirement=0.0, bloom=topic_to_bloom(b"aaaa")))
    interest = await connect(node, StatusOptions(pow_requirement=0.0, topic_interest=(b"bbbb",)))
    nothing = await connect(node, StatusOptions(pow_requirement=0.0, topic_interest=()))
    strong = sealed(1, pow_target=2.0, topic=b"cccc")
    weak = [envelope(i, topic=t) for i, t in enumerate((b"aaaa", b"bbbb"))]
    assert calculate_pow(strong) >= 1.0 and all(calculate_pow(e) < 1.0 for e in weak)
    results = await node.publish([strong, *weak])
    assert [r.status for r in results] == [PublishStatus.QUEUED] * 3
    await forward(node)
    assert sorted(received(everyone)) == [b"aaaa", b"bbbb", b"cccc"]
    assert received(picky_pow) == [b"cccc"]
    assert received(picky_bloom) == [b"aaaa"]
    assert received(interest) == [b"bbbb"]
    assert received(nothing) == []
    assert len(everyone.of(c.MESSAGES_CODE)) == 1  # one Messages packet per peer per round
    await forward(node)  # known-sets: nothing is sent twice
    assert len(everyone.of(c.MESSAGES_CODE)) == 1


async def test_envelopes_are_not_echoed_to_their_sender() -> None:
    sink = MemorySink()
    node = node_with(sink=sink)
    source, other = await connect(node), await connect(node)
    batch = [envelope(i) for i in range(3)]
    await protocol(node).handle(source, c.MESSAGES_CODE, encode_envelopes(batch))
    assert [e.hash for e in sink.envelopes] == [e.hash for e in batch]
    assert sink.calls[0].peer_id == source.remote_id_hash and sink.calls[0].received_at == NOW
    await forward(node)
    assert received(source) == [] and len(received(other)) == 3
    await protocol(node).handle(other, c.MESSAGES_CODE, encode_envelopes(batch))  # cache hits
    assert len(sink.envelopes) == 3 and node.metrics.envelopes_cached_total == {"miss": 3, "hit": 3}
    [info_source, info_other] = node.peers()
    assert (info_source.envelopes_received, info_other.envelopes_sent) == (3, 3)


async def test_status_update_reconsiders_held_back_envelopes() -> None:
    node = node_with()
    peer = await connect(node, StatusOptions(pow_requirement=0.0, topic_interest=(b"aaaa",)))
    await node.publish([envelope(1, topic=b"bbbb")])
    await forward(node)
    assert received(peer) == []
    update = encode_options(StatusOptions(topic_interest=(b"aaaa", b"bbbb")))
    await protocol(node).handle(peer, c.STATUS_UPDATE_CODE, update)
    await forward(node)
    assert received(peer) == [b"bbbb"]
    await protocol(node).handle(peer, c.STATUS_UPDATE_CODE, b"\xc3\x82ab")  # bad update: counted, kept
    assert node.metrics.envelopes_rejected_total["invalid_settings_changed"] == 1 and not peer.disconnected


async def test_received_envelopes_validated_and_errors_counted() -> None:
    sink = MemorySink()
    node = node_with(sink=sink, pow_requirement=0.0)
    peer = await connect(node)
    batch = [
        envelope(1),
        envelope(2, sent=NOW + 60),
        envelope(3, sent=NOW - 500),
        envelope(4, sent=NOW - 110),
    ]
    await protocol(node).handle(peer, c.MESSAGES_CODE, encode_envelopes(batch))
    assert [e.hash for e in sink.envelopes] == [batch[0].hash]
    assert node.metrics.envelopes_cache_failures_total == {"in_future": 1, "very_old": 1, "expired": 1}
    assert node.metrics.envelopes_received_total == 4 and node.metrics.envelopes_validated_total == 1
    await protocol(node).handle(peer, c.MESSAGES_CODE, b"\xc2\x01\x02")  # not envelopes: kept, counted
    assert node.metrics.envelopes_rejected_total["invalid_data"] == 1 and not peer.disconnected


async def test_pruning_removes_expired_envelopes_and_known_sets() -> None:
    clock = ManualClock()
    node = node_with(clock)
    await node.publish([envelope(1, ttl=10), envelope(2, ttl=100)])
    assert len(node.relay.cache) == 2
    clock.advance(11)
    assert node.relay.prune(clock.time()) == 1
    peer = await connect(node)
    await forward(node)
    assert len(received(peer)) == 1


async def test_slow_peer_is_skipped_not_waited_for() -> None:
    node = node_with()
    slow, fast = await connect(node), await connect(node)
    gate = asyncio.Event()
    slow_session = node.session(slow.remote_id)
    assert slow_session is not None

    async def stuck_write() -> None:
        await gate.wait()

    slow_session.sending = asyncio.ensure_future(stuck_write())  # a write still in progress
    await node.publish([envelope(1)])
    node.relay.forward_round()
    await asyncio.gather(*(s.sending for s in [node.session(fast.remote_id)] if s and s.sending))
    assert len(received(fast)) == 1 and received(slow) == []
    gate.set()
    await slow_session.sending
    await forward(node)
    assert len(received(slow)) == 1


async def test_confirmations_response_then_batch_ack() -> None:
    node = node_with(confirmations=True)
    peer = await connect(node)
    batch = [envelope(1), envelope(2, sent=NOW + 60)]
    payload = encode_envelopes(batch)
    await protocol(node).handle(peer, c.MESSAGES_CODE, payload)
    assert peer.codes()[-2:] == [c.MESSAGE_RESPONSE_CODE, c.BATCH_ACK_CODE]
    digest = keccak256(payload)
    assert decode_batch_ack(peer.of(c.BATCH_ACK_CODE)[0]) == digest
    response = decode_message_response(peer.of(c.MESSAGE_RESPONSE_CODE)[0])
    assert response is not None and response.batch_hash == digest
    [error] = response.errors
    assert error.envelope_hash == batch[1].hash and error.code == c.ENVELOPE_TIME_NOT_SYNCED
    assert rlp.decode(peer.of(c.MESSAGE_RESPONSE_CODE)[0])[0] == b"\x01"


async def test_publish_rejections_and_duplicates() -> None:
    node = node_with(max_message_size=200)
    results = await node.publish([b"\x01\x02", envelope(1, size=400).raw, envelope(2), envelope(2)])
    assert [r.status for r in results] == [
        PublishStatus.REJECTED,
        PublishStatus.REJECTED,
        PublishStatus.QUEUED,
        PublishStatus.ALREADY_KNOWN,
    ]
    assert results[0].error.startswith("malformed") and results[1].fault is not None
    assert results[1].fault.value == "oversized"


class SlowSink:
    """Never returns: exercises the sink timeout."""

    def __init__(self) -> None:
        self.started = 0

    async def accept(
        self,
        peer_id: bytes | None,
        envelopes: Sequence[Envelope],
        received_at: float,
        *,
        ephemeral: bool = False,
    ) -> bool:
        self.started += 1
        await asyncio.Event().wait()
        return True  # pragma: no cover - never reached


async def test_sink_timeout_is_bounded_and_counted() -> None:
    sink = SlowSink()
    node = WakuNode(NodeConfig(sink_timeout=0.05), sink, clock=ManualClock())
    peer = await connect(node)
    await protocol(node).handle(peer, c.MESSAGES_CODE, encode_envelopes([envelope(1)]))
    assert sink.started == 1 and node.metrics.sink_failures["timeout"] == 1
    assert len(node.relay.cache) == 1  # still cached and relayed


class VerdictSink:
    """Takes or refuses each call as scripted; records what it got and what the peer had been sent by then."""

    def __init__(self, peer_codes: list[list[int]], *verdicts: bool) -> None:
        self.verdicts = list(verdicts)
        self.calls: list[list[bytes]] = []
        self.peer_codes = peer_codes
        self.codes_at_call: list[list[int]] = []

    async def accept(
        self,
        peer_id: bytes | None,
        envelopes: Sequence[Envelope],
        received_at: float,
        *,
        ephemeral: bool = False,
    ) -> bool:
        self.calls.append([e.hash for e in envelopes])
        self.codes_at_call.append(list(self.peer_codes[-1]) if self.peer_codes else [])
        return self.verdicts.pop(0)


def not_stored(peer: FakePeer, index: int = -1) -> list[bytes]:
    response = decode_message_response(peer.of(c.MESSAGE_RESPONSE_CODE)[index])
    assert response is not None
    assert all(e.code == c.ENVELOPE_OTHER_ERROR and e.description == NOT_STORED for e in response.errors)
    return [e.envelope_hash for e in response.errors]


async def test_a_confirmation_never_covers_what_the_sink_refused() -> None:
    """Found by the soak (docs/soak.md): the Batch Ack went out before the sink was asked, so envelopes the
    edge peer then dropped (its ingest buffer full) had been acknowledged. Now the sink answers first, what
    it refused is listed as an error, and the peer's next copy is handed over again."""
    codes: list[list[int]] = []
    sink = VerdictSink(codes, False, True)
    node = WakuNode(NodeConfig(confirmations=True), sink, clock=ManualClock())
    peer = await connect(node)
    codes.append(peer.codes())
    batch = [envelope(1), envelope(2)]
    payload = encode_envelopes(batch)
    await protocol(node).handle(peer, c.MESSAGES_CODE, payload)
    assert c.MESSAGE_RESPONSE_CODE not in sink.codes_at_call[0]  # the sink was asked before confirming
    assert peer.codes()[-2:] == [c.MESSAGE_RESPONSE_CODE, c.BATCH_ACK_CODE]
    assert not_stored(peer) == [e.hash for e in batch]
    await protocol(node).handle(peer, c.MESSAGES_CODE, payload)  # the peer sends them again: taken now
    assert sink.calls == [[e.hash for e in batch]] * 2 and not_stored(peer) == []
    await protocol(node).handle(peer, c.MESSAGES_CODE, payload)  # a third copy: already taken, not asked
    assert len(sink.calls) == 2 and not_stored(peer) == []
    assert len(peer.of(c.BATCH_ACK_CODE)) == 3


async def test_a_sink_timeout_is_not_confirmed_either() -> None:
    node = WakuNode(NodeConfig(confirmations=True, sink_timeout=0.05), SlowSink(), clock=ManualClock())
    peer = await connect(node)
    await protocol(node).handle(peer, c.MESSAGES_CODE, encode_envelopes([envelope(1)]))
    assert node.metrics.sink_failures["timeout"] == 1
    assert not_stored(peer) == [envelope(1).hash]


async def test_without_confirmations_a_refused_envelope_is_handed_over_again_on_its_next_copy() -> None:
    sink = VerdictSink([], False, True)
    node = WakuNode(NodeConfig(), sink, clock=ManualClock())
    first, second = await connect(node), await connect(node)
    await protocol(node).handle(first, c.MESSAGES_CODE, encode_envelopes([envelope(1)]))
    await protocol(node).handle(second, c.MESSAGES_CODE, encode_envelopes([envelope(1)]))
    await protocol(node).handle(first, c.MESSAGES_CODE, encode_envelopes([envelope(1)]))
    assert sink.calls == [[envelope(1).hash]] * 2
    assert first.of(c.BATCH_ACK_CODE) == [] and first.of(c.MESSAGE_RESPONSE_CODE) == []


async def test_shh_settings_packets_and_bloom_status() -> None:
    node = node_with()
    peer = await connect(node, StatusOptions(pow_requirement=0.0, bloom=topics_to_bloom([b"aaaa"])), "shh/6")
    proto = protocol(node, "shh/6")
    await node.publish([envelope(1, topic=b"aaaa"), envelope(2, topic=b"bbbb")])
    await forward(node)
    assert received(peer) == [b"aaaa"]
    await proto.handle(peer, c.BLOOM_EXCHANGE_CODE, rlp.encode(b"\xff" * 64))
    await forward(node)
    assert received(peer) == [b"aaaa", b"bbbb"]
    with pytest.raises(Exception, match="invalid bloom"):
        await proto.handle(peer, c.BLOOM_EXCHANGE_CODE, rlp.encode(b"\xff" * 63))
