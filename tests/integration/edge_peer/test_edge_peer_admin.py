"""NodeInfo, ListPeers, AddPeer (static), SetTrusted, RemovePeer over real gRPC; metrics names."""

from __future__ import annotations

import grpc
import pytest

from devp2p.config import ServerConfig
from mailmesh.edgepeer.v1 import edgepeer_pb2
from tests.integration.edge_peer.edge_peer_support import SESSION, Edge, request_client, wait_until
from wakucodec import secp
from wakucodec.bloom import FULL_BLOOM
from wakucodec.keccak import keccak256
from wakunode.client import WakuClient
from wakunode.config import NodeConfig


async def test_node_info(edge: Edge) -> None:
    info = await edge.stub.NodeInfo(edgepeer_pb2.NodeInfoRequest())
    assert info.enode == edge.enode and info.node_id == keccak256(edge.pubkey)
    assert info.listen_address == f"127.0.0.1:{edge.edge.server.port}"
    assert list(info.capabilities) == ["waku/1", "waku/0", "shh/6"]
    assert info.bloom == FULL_BLOOM and not info.light_node and info.pow_requirement == 0.0
    assert info.max_message_size == 1024 * 1024 and info.max_peers == 50 and info.peer_count == 0
    assert info.instance == "edge-test" and info.started_at.seconds > 0


async def test_inbound_peer_is_listed_and_trust_follows_set_trusted(edge: Edge) -> None:
    async with request_client() as client:
        await client.connect(edge.enode)
        await wait_until(lambda: len(edge.edge.node.peers()) == 2, what="shh/6 and waku/1 handshakes")
        listed = await edge.stub.ListPeers(edgepeer_pb2.ListPeersRequest())
        assert listed.max_peers == 50 and len(listed.peers) == 1
        peer = listed.peers[0]
        assert peer.peer_id == keccak256(client.server.pubkey) and peer.capability == "waku/1"
        assert peer.direction == edgepeer_pb2.PEER_DIRECTION_INBOUND and peer.snappy
        assert peer.topic_interest_count == 0 and peer.bloom == b""  # the client's empty topic interest
        assert not peer.trusted and not peer.static_peer
        reply = await edge.stub.SetTrusted(edgepeer_pb2.SetTrustedRequest(peer_id=peer.peer_id, trusted=True))
        assert reply.connected
        listed = await edge.stub.ListPeers(edgepeer_pb2.ListPeersRequest())
        assert listed.peers[0].trusted
        removed = await edge.stub.RemovePeer(edgepeer_pb2.RemovePeerRequest(peer_id=peer.peer_id))
        assert removed.was_connected and not removed.was_static
        await wait_until(lambda: not edge.edge.peers(), what="peer gone")
    again = await edge.stub.RemovePeer(edgepeer_pb2.RemovePeerRequest(peer_id=bytes(32)))
    assert not again.was_connected and not again.was_static
    # Trust by node ID is remembered while the peer is away.
    offline = keccak256(secp.public_key(secp.generate_private_key()))
    assert not (
        await edge.stub.SetTrusted(edgepeer_pb2.SetTrustedRequest(peer_id=offline, trusted=True))
    ).connected
    assert edge.edge.directory.is_trusted_id(offline)


async def test_add_static_peer_dials_and_remove_forgets_it(edge: Edge) -> None:
    target = WakuClient(
        config=NodeConfig(pow_requirement=0.0),
        server_config=ServerConfig(host="127.0.0.1", port=0, session=SESSION),
    )
    async with target:
        enode = target.server.enode
        reply = await edge.stub.AddPeer(
            edgepeer_pb2.AddPeerRequest(enode=enode, static_peer=True, trusted=True)
        )
        assert reply.peer_id == keccak256(target.server.pubkey) and not reply.already_connected
        await wait_until(lambda: len(edge.edge.node.peers()) == 2, what="static dial, both sessions")
        peer = (await edge.stub.ListPeers(edgepeer_pb2.ListPeersRequest())).peers[0]
        assert peer.direction == edgepeer_pb2.PEER_DIRECTION_OUTBOUND
        assert peer.static_peer and peer.trusted and peer.enode == enode
        again = await edge.stub.AddPeer(edgepeer_pb2.AddPeerRequest(enode=enode))
        assert again.already_connected
        removed = await edge.stub.RemovePeer(edgepeer_pb2.RemovePeerRequest(enode=enode))
        assert removed.was_connected and removed.was_static
        await wait_until(lambda: not edge.edge.peers(), what="disconnect")
        assert edge.edge.server.static_peers == ()


@pytest.mark.parametrize(
    "request_",
    [
        edgepeer_pb2.AddPeerRequest(enode="enode://nothex@127.0.0.1:1"),
        edgepeer_pb2.AddPeerRequest(enode=""),
    ],
)
async def test_bad_enode_is_invalid_argument(edge: Edge, request_: edgepeer_pb2.AddPeerRequest) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await edge.stub.AddPeer(request_)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await edge.stub.RemovePeer(edgepeer_pb2.RemovePeerRequest(peer_id=b"short"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_metrics_use_status_go_names(edge: Edge) -> None:
    async with request_client() as client:
        await client.connect(edge.enode)
        await wait_until(lambda: len(edge.edge.node.peers()) == 2, what="shh/6 and waku/1 handshakes")
        text = edge.scrape()
        assert edge.metric("p2p_peers") == 1
        assert edge.metric("edge_peers", {"capability": "waku/1", "direction": "inbound"}) == 1
    for name in (
        "waku_envelopes_received_total",
        "waku_envelopes_validated_total",
        "waku_envelopes_size_bytes_bucket",
        "mailserver_delivery_attempts_total",
        "mailserver_delivery_duration_seconds_bucket",
        "devp2p_sessions_total",
        "edge_ingest_dropped_envelopes_total",
        "edge_ingest_buffered_envelopes",
        "edge_stream_subscribers",
        "edge_relay_cache_envelopes",
    ):
        assert f"\n{name}" in text, name
    for family in (
        "waku_envelopes_cache_failures_total",
        "waku_rate_limits_exceeded_total",
        "grpc_server_started_total",
    ):
        assert f"# TYPE {family} counter" in text
    assert edge.metric("devp2p_sessions_total") == 1
