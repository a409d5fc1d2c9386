"""A published envelope reaches a real RLPx peer without waiting for a forwarding round, and the round does
not send it again (wakunode ``Relay.push``; the edge peer's Publish path); the send service's concurrent
attempts share Publish calls and each envelope still reaches the peer once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import CollectorRegistry

from mailmesh.common.v1 import common_pb2
from services.send.clients import EdgePeers
from tests.integration.send.send_support import TOPIC, Mesh, S, Watch, start_send
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


async def test_concurrent_attempts_share_publish_calls_and_each_envelope_is_sent_once(
    mesh: Mesh, tmp_path: Path
) -> None:
    _, sink = await mesh.peer()
    handle = await start_send(mesh, tmp_path / "msg.db")
    watch = Watch(handle)
    try:
        messages = [common_pb2.WakuMessage(payload=b"b%d" % i, content_topic=TOPIC) for i in range(40)]
        replies = await asyncio.gather(*(handle.send(message=m) for m in messages))
        done = [await watch.until(r.request_id, S.SEND_STATE_SUCCEEDED) for r in replies]
        assert all(d.sent and d.progress.relayed_peers == 1 for d in done)
        received = await sink.wait_for(40)
        assert sorted(e.hash for e in received) == sorted(d.envelope_hash for d in done)  # once each
    finally:
        await watch.close()
        await handle.stop()


async def test_publishes_made_together_go_in_one_call_with_an_outcome_each(mesh: Mesh) -> None:
    _, sink = await mesh.peer()
    edges = EdgePeers(
        [mesh.edge_address], publish_timeout_s=5.0, call_timeout_s=5.0, registry=CollectorRegistry()
    )
    try:
        batch = envelopes(10, topic=b"\x0a\x0b\x0c\x0d")
        outcomes = await asyncio.gather(*(edges.publish(e.raw, e.hash, ephemeral=False) for e in batch))
        assert [(o.envelope_hash, o.relayed_to) for o in outcomes] == [(e.hash, 1) for e in batch]
        assert (edges._batches[False].flushes, edges._batches[False].items) == (1, 10)
        assert sorted(e.hash for e in await sink.wait_for(10)) == sorted(e.hash for e in batch)
        again = await edges.publish(batch[0].raw, batch[0].hash, ephemeral=False)
        assert again.relayed_to == 1  # already known, held by the peer
    finally:
        await edges.close()


async def test_an_envelope_the_edge_peer_refuses_fails_alone_not_its_batch(mesh: Mesh) -> None:
    _, sink = await mesh.peer()
    edges = EdgePeers(
        [mesh.edge_address], publish_timeout_s=5.0, call_timeout_s=5.0, registry=CollectorRegistry()
    )
    try:
        [good] = envelopes(1, topic=b"\x0a\x0b\x0c\x0d")
        [huge] = envelopes(1, topic=b"\x0a\x0b\x0c\x0d", size=(1 << 20) + 1024, first=1)  # over the max size
        outcomes = await asyncio.gather(
            edges.publish(good.raw, good.hash, ephemeral=False),
            edges.publish(huge.raw, huge.hash, ephemeral=False),
        )
        assert outcomes[0].relayed_to == 1 and not outcomes[0].detail
        assert outcomes[1].relayed_to == 0 and "max message size" in outcomes[1].detail
        assert edges._batches[False].flushes == 1  # one shared call, refused, then each envelope alone
        assert [e.hash for e in await sink.wait_for(1)] == [good.hash]
    finally:
        await edges.close()
