"""A message this node originates goes out at once (``Relay.push``), not at the next forwarding round, to
the peers whose PoW requirement and topic interest admit it; the round then sees it as already sent to them.
In-memory peer doubles; no forwarding loop runs, so every write here is the push's."""

from __future__ import annotations

import asyncio

from tests.unit.wakunode.support import FakePeer, ManualClock, envelope, protocol
from wakucodec.envelope import decode_envelopes
from wakunode import constants as c
from wakunode.config import NodeConfig
from wakunode.node import WakuNode
from wakunode.peerstate import WakuPeer
from wakunode.protocol import encode_status
from wakunode.publish import PublishStatus
from wakunode.status_options import StatusOptions


async def _connect(node: WakuNode, **options: object) -> tuple[FakePeer, WakuPeer]:
    peer = FakePeer()
    proto = protocol(node)
    await proto.on_start(peer)
    status = StatusOptions(pow_requirement=0, **options)  # type: ignore[arg-type]
    await proto.handle(peer, c.STATUS_CODE, encode_status(proto.flavor, status))
    session = node.session(peer.remote_id)
    assert session is not None
    return peer, session


def _hashes(peer: FakePeer) -> list[bytes]:
    return [e.hash for payload in peer.of(c.MESSAGES_CODE) for e in decode_envelopes(payload)]


async def test_a_published_envelope_is_written_at_once_to_admitting_peers_only() -> None:
    node = WakuNode(NodeConfig(), clock=ManualClock())  # never started: no forwarding round ever runs
    peer, session = await _connect(node)
    other, other_session = await _connect(node, topic_interest=(b"zzzz",))
    env = envelope(1)
    [result] = await node.publish([env])
    assert result.status is PublishStatus.QUEUED  # relay_timeout 0: not waited for, but already under way
    assert session.sending is not None and other_session.sending is None
    await session.sending
    assert _hashes(peer) == [env.hash] and _hashes(other) == []
    assert node.relay.forward_round() == 0  # the round finds nothing new for either peer
    assert node.metrics.envelopes_sent_total == 1


async def test_publish_waits_for_the_pushed_write_not_for_a_round() -> None:
    node = WakuNode(NodeConfig(), clock=ManualClock())  # no round would ever come: the wait ends by the push
    peer, _ = await _connect(node)
    [result] = await node.publish([envelope(2)], relay_timeout=30.0)
    assert (result.status, result.relayed_to) == (PublishStatus.PUBLISHED, 1)
    assert _hashes(peer) == [result.hash]


async def test_pushes_to_a_busy_peer_wait_in_one_follower_and_go_out_in_one_packet() -> None:
    node = WakuNode(NodeConfig(), clock=ManualClock())
    peer, session = await _connect(node)
    gate = asyncio.Event()

    async def stuck_write() -> None:
        await gate.wait()

    session.sending = asyncio.ensure_future(stuck_write())  # a round's write still in progress
    first, second = envelope(3), envelope(4)
    await node.publish([first])
    follower = session.sending
    await node.publish([second])
    assert session.sending is follower  # one queued write per busy peer, not one task per publish
    assert node.relay.forward_round() == 0  # the round skips a peer whose write is not done
    gate.set()
    await follower
    assert peer.of(c.MESSAGES_CODE) and len(peer.of(c.MESSAGES_CODE)) == 1
    assert _hashes(peer) == [first.hash, second.hash]
    assert node.relay.forward_round() == 0 and node.metrics.envelopes_sent_total == 2


async def test_a_follower_cancelled_with_its_session_cancels_the_write_it_waited_for() -> None:
    node = WakuNode(NodeConfig(), clock=ManualClock())
    _, session = await _connect(node)

    async def stuck_write() -> None:
        await asyncio.Event().wait()

    stuck = asyncio.ensure_future(stuck_write())
    session.sending = stuck
    await node.publish([envelope(5)])
    follower = session.sending
    assert follower is not None and follower is not stuck
    await asyncio.sleep(0)  # the follower starts waiting
    follower.cancel()
    await asyncio.gather(follower, return_exceptions=True)
    assert stuck.cancelled() and node.relay._queued == {}


async def test_a_republished_envelope_goes_at_once_to_a_peer_that_connected_since() -> None:
    node = WakuNode(NodeConfig(), clock=ManualClock())
    env = envelope(6)
    [first] = await node.publish([env])  # no peer yet: cached, sent to nobody
    assert (first.status, first.relayed_to) == (PublishStatus.QUEUED, 0)
    peer, _ = await _connect(node)
    [again] = await node.publish([env], relay_timeout=30.0)  # a retry; no round would come
    assert (again.status, again.relayed_to) == (PublishStatus.ALREADY_KNOWN, 1)
    assert _hashes(peer) == [env.hash]
    assert node.relay.forward_round() == 0
