"""A published envelope reaches a real RLPx peer without waiting for a forwarding round, and the round does
not send it again (wakunode ``Relay.push``; the edge peer's Publish path)."""

from __future__ import annotations

from tests.integration.wakunode.support import FAST, envelopes, link, running_node
from wakunode.publish import PublishStatus


async def test_a_published_envelope_reaches_a_real_peer_at_once_and_only_once() -> None:
    # The source's round never runs by itself (an hour apart): only the push can deliver within the test.
    async with running_node(FAST, transmission_cycle=3600.0) as source, running_node(FAST) as peer:
        await link(source, peer)
        [env] = envelopes(1)
        [result] = await source.node.publish([env], relay_timeout=30.0)
        assert (result.status, result.relayed_to) == (PublishStatus.PUBLISHED, 1)
        assert [e.hash for e in await peer.sink.wait_for(1)] == [env.hash]
        assert source.node.relay.forward_round() == 0  # the round sees it as known to the peer
        [marker] = envelopes(1, first=1)
        await source.node.publish([marker], relay_timeout=30.0)
        await peer.sink.wait_for(2)
        # Every envelope the peer was sent, duplicates included, passes its received counter once.
        assert peer.node.metrics.envelopes_received_total == 2
        assert source.node.metrics.envelopes_sent_total == 2
