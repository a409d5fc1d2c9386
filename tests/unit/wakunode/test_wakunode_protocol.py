"""Handshake and dispatch rules of the SubProtocol, with in-memory peers: which inputs disconnect (0x10),
which are ignored and counted; packet limits; trust for 0x7f/0x7d."""

from __future__ import annotations

import asyncio

import pytest

from devp2p.errors import DisconnectReason, ProtocolError
from tests.unit.wakunode.support import FakePeer, ManualClock, envelope, protocol
from wakucodec import rlp
from wakucodec.envelope import Envelope, encode_envelopes
from wakucodec.responses import Completion, encode_completion, encode_p2p_messages
from wakunode import constants as c
from wakunode.config import NodeConfig, RateLimiterConfig
from wakunode.errors import BadStatus, OversizedPacket, RateLimitExceeded
from wakunode.node import WakuNode
from wakunode.peerstate import Flavor
from wakunode.status_options import (
    StatusOptions,
    encode_options,
    encode_shh_status,
    encode_waku0_status,
    pow_to_bits,
)


async def started(node: WakuNode, capability: str = "waku/1", peer: FakePeer | None = None) -> FakePeer:
    peer = peer or FakePeer()
    await protocol(node, capability).on_start(peer)
    return peer


@pytest.mark.parametrize(
    ("capability", "status"),
    [
        ("waku/1", encode_options(StatusOptions(pow_requirement=0.1))),
        ("waku/0", encode_waku0_status(StatusOptions(pow_requirement=0.1))),
        ("shh/6", encode_shh_status(StatusOptions(pow_requirement=0.1))),
    ],
)
async def test_each_flavor_handshakes(capability: str, status: bytes) -> None:
    node = WakuNode(clock=ManualClock())
    peer = await started(node, capability)
    await protocol(node, capability).handle(peer, c.STATUS_CODE, status)
    [info] = node.peers()
    assert info.capability == capability and info.pow_requirement == 0.1


@pytest.mark.parametrize(
    ("capability", "code", "payload", "match"),
    [
        ("waku/1", c.MESSAGES_CODE, b"\xc0", "before status"),
        ("waku/1", c.STATUS_CODE, b"\xff", "failed to decode"),
        ("waku/1", c.STATUS_CODE, rlp.encode([[0, pow_to_bits(float("nan"))]]), "invalid pow"),
        ("waku/1", c.STATUS_CODE, rlp.encode([[1, b"\x00" * 32]]), "bloom filter size"),
        ("waku/0", c.STATUS_CODE, encode_options(StatusOptions()), "status must be"),
        ("shh/6", c.STATUS_CODE, rlp.encode([7, 0]), "version mismatch"),
    ],
)
async def test_bad_status_disconnects_with_subprotocol_error(
    capability: str, code: int, payload: bytes, match: str
) -> None:
    node = WakuNode(clock=ManualClock())
    peer = await started(node, capability)
    with pytest.raises(BadStatus, match=match) as info:
        await protocol(node, capability).handle(peer, code, payload)
    assert isinstance(info.value, ProtocolError)  # devp2p ends the session with the error's reason:
    assert info.value.disconnect_reason == DisconnectReason.SUBPROTOCOL_ERROR  # 0x10, as geth does
    assert node.metrics.peer_disconnects["bad_status"] == 1 and node.peers() == []


async def test_second_status_and_unknown_codes_are_ignored() -> None:
    node = WakuNode(clock=ManualClock())
    peer = await started(node)
    proto = protocol(node)
    await proto.handle(peer, c.STATUS_CODE, encode_options(StatusOptions(pow_requirement=0.3)))
    await proto.handle(peer, c.STATUS_CODE, b"garbage")
    await proto.handle(peer, 77, b"\xc0")
    await proto.handle(peer, c.P2P_REQUEST_CODE, b"\xc0")  # no history backend
    assert node.peers()[0].pow_requirement == 0.3
    assert node.metrics.ignored_packets == {
        "second_status": 1,
        "unknown_code": 1,
        "p2p_request_no_mailserver": 1,
    }


async def test_oversized_packet_disconnects() -> None:
    node = WakuNode(NodeConfig(max_message_size=1000), clock=ManualClock())
    peer = await started(node)
    proto = protocol(node)
    await proto.handle(peer, c.STATUS_CODE, encode_options(StatusOptions()))
    await proto.handle(peer, c.MESSAGES_CODE, encode_envelopes([envelope(1, size=900)]))
    with pytest.raises(OversizedPacket) as info:
        await proto.handle(peer, c.MESSAGES_CODE, encode_envelopes([envelope(2, size=1000)]))
    assert info.value.disconnect_reason == DisconnectReason.SUBPROTOCOL_ERROR
    assert node.metrics.peer_disconnects["oversized"] == 1


async def test_rate_limit_tolerance_then_disconnect_and_whitelist() -> None:
    clock = ManualClock()
    limits = RateLimiterConfig(
        packets_per_ip=0, packets_per_peer=2, bytes_per_ip=0, bytes_per_peer=0, tolerance=3
    )
    node = WakuNode(NodeConfig(rate_limiter=limits), clock=clock)
    proto = protocol(node)
    peer = await started(node)
    await proto.handle(peer, c.STATUS_CODE, encode_options(StatusOptions()))  # token 1
    await proto.handle(peer, 77, b"")  # token 2
    for _ in range(2):
        await proto.handle(peer, 77, b"")  # violations 1, 2: still processed
    clock.advance(1.0)  # refill: no violation
    await proto.handle(peer, 77, b"")
    await proto.handle(peer, 77, b"")
    assert node.metrics.rate_limits_exceeded_total["peer_id"] == 2
    with pytest.raises(RateLimitExceeded):  # status-go: dropped when violations >= tolerance
        await proto.handle(peer, 77, b"")
    assert node.metrics.rate_limits_exceeded_total["peer_id"] == 3
    assert node.metrics.peer_disconnects["rate_limit"] == 1
    trusted = FakePeer()
    node.set_trusted(trusted.remote_id, True)
    await started(node, peer=trusted)
    await proto.handle(trusted, c.STATUS_CODE, encode_options(StatusOptions()))
    for _ in range(10):
        await proto.handle(trusted, 77, b"")  # whitelisted
    assert node.metrics.rate_limits_exceeded_total["peer_id"] == 3


async def test_status_timeout_disconnects() -> None:
    node = WakuNode(NodeConfig(status_timeout=0.01), clock=ManualClock())
    peer = await started(node)
    async with asyncio.timeout(2):
        while not peer.disconnected:
            await asyncio.sleep(0.005)
    assert peer.disconnected == [DisconnectReason.SUBPROTOCOL_ERROR]
    assert node.metrics.peer_disconnects["status_timeout"] == 1


class Listener:
    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []
        self.completions: list[Completion] = []

    def on_p2p_envelopes(self, pubkey: bytes, envelopes: list[Envelope]) -> None:
        self.envelopes.extend(envelopes)

    def on_p2p_complete(self, pubkey: bytes, completion: Completion) -> None:
        self.completions.append(completion)


@pytest.mark.parametrize("capability", ["waku/1", "shh/6"])
async def test_p2p_packets_only_from_trusted_peers(capability: str) -> None:
    node = WakuNode(clock=ManualClock())
    listener = Listener()
    node.p2p_listener = listener
    proto = protocol(node, capability)
    peer = await started(node, capability)
    flavor = Flavor.SHH6 if capability == "shh/6" else Flavor.WAKU1
    status = encode_shh_status(StatusOptions()) if flavor.is_shh else encode_options(StatusOptions())
    await proto.handle(peer, c.STATUS_CODE, status)
    env = envelope(1)
    complete = encode_completion(b"\x01" * 32, env.hash)
    await proto.handle(peer, c.P2P_MESSAGE_CODE, encode_p2p_messages([env.raw]))
    await proto.handle(peer, c.P2P_REQUEST_COMPLETE_CODE, complete)
    assert listener.envelopes == [] and node.metrics.envelopes_rejected_total["untrusted_p2p"] == 2
    node.set_trusted(peer.remote_id, True)
    await proto.handle(peer, c.P2P_MESSAGE_CODE, encode_p2p_messages([env.raw]))
    await proto.handle(peer, c.P2P_MESSAGE_CODE, env.raw)  # geth's single form
    await proto.handle(peer, c.P2P_MESSAGE_CODE, b"\x05")  # garbage: counted
    await proto.handle(peer, c.P2P_REQUEST_COMPLETE_CODE, complete)
    assert [e.hash for e in listener.envelopes] == [env.hash, env.hash]
    assert listener.completions[0].last_envelope_hash == env.hash
    assert node.metrics.envelopes_rejected_total["invalid_p2p"] == 1
    assert len(node.relay.cache) == 0  # p2p envelopes are not cached, relayed or archived


async def test_update_settings_announces_and_tolerates() -> None:
    node = WakuNode(NodeConfig(pow_requirement=0.0), clock=ManualClock())
    waku, shh = await started(node), await started(node, "shh/6")
    await protocol(node).handle(waku, c.STATUS_CODE, encode_options(StatusOptions()))
    await protocol(node, "shh/6").handle(shh, c.STATUS_CODE, encode_shh_status(StatusOptions()))
    await node.update_settings(pow_requirement=5.0)
    assert waku.of(c.STATUS_UPDATE_CODE) == [encode_options(StatusOptions(pow_requirement=5.0))]
    assert shh.of(c.POW_REQUIREMENT_CODE) == [rlp.encode(pow_to_bits(5.0))]
    assert node.status_options.pow_requirement == 5.0
    policy = node.relay.policy
    assert (policy.min_pow, policy.min_pow_tolerance) == (5.0, 0.0)  # the old value is tolerated for a while
