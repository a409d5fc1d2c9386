"""mailmesh.edgepeer.v1.EdgePeerService: proto ⇄ domain translation only.

Errors are :mod:`meshcore.errors` categories (INVALID_ARGUMENT for unusable requests, RESOURCE_EXHAUSTED for a
slow StreamEnvelopes consumer, UNAVAILABLE while shutting down), mapped to status codes by the interceptor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from mailmesh.common.v1 import common_pb2
from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from meshcore.errors import InvalidArgument
from meshcore.protoconv import clip_utf8, timestamp
from services.edge_peer.feed import LiveEnvelope, SubscriptionFilter
from services.edge_peer.logic import EdgePeer, PeerView
from wakucodec.constants import BLOOM_SIZE, MAX_TOPIC_INTEREST, TOPIC_LENGTH
from wakucodec.pow import calculate_pow
from wakucodec.validation import EnvelopeFault
from wakunode.publish import PublishResult, PublishStatus

__all__ = [
    "DEFAULT_RELAY_TIMEOUT_S",
    "MAX_PUBLISH_ENVELOPES",
    "SERVICE_NAME",
    "EdgePeerServicer",
    "to_received",
]

SERVICE_NAME = "mailmesh.edgepeer.v1.EdgePeerService"
MAX_PUBLISH_ENVELOPES = 1000
DEFAULT_RELAY_TIMEOUT_S = 1.0
MAX_RELAY_TIMEOUT_S = 30.0
DEFAULT_MAX_BATCH = 256
MAX_BATCH = 1024
_ERROR_TEXT_MAX = 256

_STATUS = {
    PublishStatus.PUBLISHED: edgepeer_pb2.PUBLISH_STATUS_PUBLISHED,
    PublishStatus.ALREADY_KNOWN: edgepeer_pb2.PUBLISH_STATUS_ALREADY_KNOWN,
    PublishStatus.NO_PEERS: edgepeer_pb2.PUBLISH_STATUS_NO_PEERS,
    PublishStatus.QUEUED: edgepeer_pb2.PUBLISH_STATUS_NO_PEERS,
    PublishStatus.REJECTED: edgepeer_pb2.PUBLISH_STATUS_REJECTED,
}
_FAULTS = {
    EnvelopeFault.IN_FUTURE: common_pb2.ENVELOPE_FAULT_IN_FUTURE,
    EnvelopeFault.VERY_OLD: common_pb2.ENVELOPE_FAULT_VERY_OLD,
    EnvelopeFault.EXPIRED: common_pb2.ENVELOPE_FAULT_EXPIRED,
    EnvelopeFault.OVERSIZED: common_pb2.ENVELOPE_FAULT_OVERSIZED,
    EnvelopeFault.LOW_POW: common_pb2.ENVELOPE_FAULT_LOW_POW,
    EnvelopeFault.NO_BLOOM_MATCH: common_pb2.ENVELOPE_FAULT_NO_BLOOM_MATCH,
    EnvelopeFault.NO_TOPIC_INTEREST_MATCH: common_pb2.ENVELOPE_FAULT_NO_TOPIC_INTEREST_MATCH,
}


def _invalid(field: str, problem: str) -> InvalidArgument:
    return InvalidArgument(f"{field}: {problem}", {"reason": "INVALID_FIELD", "field": field})


def _trim(text: str) -> str:
    return clip_utf8(text, _ERROR_TEXT_MAX, marker="")


def to_publish_result(result: PublishResult) -> edgepeer_pb2.PublishResult:
    """One PublishResult proto; an undecodable envelope is REJECTED with fault MALFORMED."""
    status = _STATUS[result.status]
    fault = common_pb2.ENVELOPE_FAULT_UNSPECIFIED
    if result.status is PublishStatus.REJECTED:
        fault = _FAULTS[result.fault] if result.fault is not None else common_pb2.ENVELOPE_FAULT_MALFORMED
    error = result.error
    if status == edgepeer_pb2.PUBLISH_STATUS_NO_PEERS and not error:
        error = "no peer took the envelope within the relay timeout"
    return edgepeer_pb2.PublishResult(
        hash=result.hash, status=status, relayed_to=result.relayed_to, fault=fault, error=_trim(error)
    )


def to_received(item: LiveEnvelope) -> edgepeer_pb2.ReceivedEnvelope:
    """One ReceivedEnvelope proto (with ``data``)."""
    env = item.envelope
    return edgepeer_pb2.ReceivedEnvelope(
        envelope=common_pb2.Envelope(
            rlp=env.raw,
            hash=env.hash,
            expiry=env.expiry,
            ttl=env.ttl,
            topic=env.topic,
            data=env.data,
            nonce=env.nonce,
            sent=env.sent,
            pow=calculate_pow(env),
        ),
        source_peer_id=item.source_peer_id or b"",
        received_at=timestamp(item.received_at),
        sequence=item.sequence,
        local=item.local,
        ephemeral=item.ephemeral,
    )


def to_peer(view: PeerView, *, trusted: bool) -> edgepeer_pb2.Peer:
    """One Peer proto."""
    info = view.info
    address = ""
    if info.remote_address is not None:
        host, port = info.remote_address
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return edgepeer_pb2.Peer(
        peer_id=info.node_id,
        enode=view.enode,
        remote_address=address,
        direction=edgepeer_pb2.PEER_DIRECTION_INBOUND
        if info.inbound
        else edgepeer_pb2.PEER_DIRECTION_OUTBOUND,
        capability=info.capability,
        pow_requirement=info.pow_requirement,
        bloom=info.bloom,
        topic_interest_count=info.topic_interest_count,
        light_node=info.light_node,
        confirmations_enabled=info.confirmations_enabled,
        connected_since=timestamp(info.connected_since),
        trusted=trusted,
        static_peer=info.static,
        client_id=info.client_id,
        snappy=info.snappy,
        envelopes_received=view.envelopes_received,
        envelopes_sent=view.envelopes_sent,
    )


def subscription_filter(request: edgepeer_pb2.StreamEnvelopesRequest) -> SubscriptionFilter:
    """The feed filter of a StreamEnvelopesRequest (INVALID_ARGUMENT for bad topics or bloom)."""
    if len(request.topics) > MAX_TOPIC_INTEREST:
        raise InvalidArgument(
            f"topics: at most {MAX_TOPIC_INTEREST}", {"reason": "LIMIT_EXCEEDED", "field": "topics"}
        )
    for topic in request.topics:
        if len(topic) != TOPIC_LENGTH:
            raise _invalid("topics", f"a topic must be {TOPIC_LENGTH} bytes, got {len(topic)}")
    if request.bloom and len(request.bloom) != BLOOM_SIZE:
        raise _invalid("bloom", f"must be empty or {BLOOM_SIZE} bytes, got {len(request.bloom)}")
    return SubscriptionFilter(
        topics=frozenset(request.topics),
        bloom=None if request.topics or not request.bloom else bytes(request.bloom),
        include_local=request.include_local,
    )


class EdgePeerServicer(edgepeer_pb2_grpc.EdgePeerServiceServicer):
    """Translates EdgePeerService calls to :class:`EdgePeer`."""

    def __init__(self, edge: EdgePeer, *, stream_queue: int, stream_queue_bytes: int) -> None:
        self._edge = edge
        self._stream_queue = stream_queue
        self._stream_queue_bytes = stream_queue_bytes

    async def Publish(  # noqa: N802 - gRPC method name
        self, request: edgepeer_pb2.PublishRequest, context: Any
    ) -> edgepeer_pb2.PublishResponse:
        """Validate, cache, relay (and archive unless ephemeral); per-envelope results."""
        count = len(request.envelopes)
        if not 1 <= count <= MAX_PUBLISH_ENVELOPES:
            raise InvalidArgument(
                f"envelopes: give 1 to {MAX_PUBLISH_ENVELOPES}, got {count}",
                {"reason": "LIMIT_EXCEEDED", "field": "envelopes"},
            )
        limit = self._edge.node.config.max_message_size
        for index, raw in enumerate(request.envelopes):
            if len(raw) > limit:
                raise _invalid(f"envelopes[{index}]", f"{len(raw)} bytes exceed the max message size {limit}")
        if len(request.traceparents) > count:
            raise _invalid(
                "traceparents", f"at most one per envelope ({count}), got {len(request.traceparents)}"
            )
        timeout = DEFAULT_RELAY_TIMEOUT_S
        if request.HasField("relay_timeout"):
            seconds = request.relay_timeout.seconds + request.relay_timeout.nanos / 1e9
            if seconds < 0 or seconds > MAX_RELAY_TIMEOUT_S:
                raise _invalid("relay_timeout", f"must be within 0..{MAX_RELAY_TIMEOUT_S:g} s")
            timeout = seconds or DEFAULT_RELAY_TIMEOUT_S
        results = await self._edge.publish(
            list(request.envelopes),
            ephemeral=request.ephemeral,
            relay_timeout=timeout,
            traceparents=list(request.traceparents),
        )
        return edgepeer_pb2.PublishResponse(results=[to_publish_result(r) for r in results])

    async def StreamEnvelopes(  # noqa: N802 - gRPC method name
        self, request: edgepeer_pb2.StreamEnvelopesRequest, context: Any
    ) -> AsyncIterator[edgepeer_pb2.StreamEnvelopesResponse]:
        """Live feed (first message carries epoch and resumed; may be empty)."""
        flt = subscription_filter(request)
        if request.max_batch > MAX_BATCH:
            raise _invalid("max_batch", f"at most {MAX_BATCH}")
        max_batch = request.max_batch or DEFAULT_MAX_BATCH
        sub = self._edge.feed.subscribe(
            flt,
            max_queue=self._stream_queue,
            max_bytes=self._stream_queue_bytes,
            resume_epoch=request.resume_epoch,
            after_sequence=request.after_sequence,
        )
        try:
            first = await sub.next_batch(max_batch) if sub.queued else []
            yield edgepeer_pb2.StreamEnvelopesResponse(
                envelopes=[to_received(i) for i in first], epoch=sub.epoch, resumed=sub.resumed
            )
            while True:
                batch = await sub.next_batch(max_batch)
                yield edgepeer_pb2.StreamEnvelopesResponse(
                    envelopes=[to_received(i) for i in batch], epoch=sub.epoch
                )
        finally:
            sub.close()

    async def ListPeers(  # noqa: N802 - gRPC method name
        self, request: edgepeer_pb2.ListPeersRequest, context: Any
    ) -> edgepeer_pb2.ListPeersResponse:
        """Connected peers, oldest first."""
        edge = self._edge
        return edgepeer_pb2.ListPeersResponse(
            peers=[to_peer(v, trusted=edge.is_trusted(v.info.pubkey)) for v in edge.peers()],
            max_peers=edge.server.config.max_peers,
        )

    async def NodeInfo(  # noqa: N802 - gRPC method name
        self, request: edgepeer_pb2.NodeInfoRequest, context: Any
    ) -> edgepeer_pb2.NodeInfoResponse:
        """Identity and advertised settings."""
        f = self._edge.facts()
        return edgepeer_pb2.NodeInfoResponse(
            enode=f.enode,
            node_id=f.node_id,
            listen_address=f.listen_address,
            capabilities=list(f.capabilities),
            pow_requirement=f.pow_requirement,
            bloom=f.bloom,
            light_node=f.light_node,
            max_message_size=f.max_message_size,
            client_id=f.client_id,
            peer_count=f.peer_count,
            max_peers=f.max_peers,
            started_at=timestamp(f.started_at),
            instance=f.instance,
        )

    async def AddPeer(  # noqa: N802 - gRPC method name
        self, request: edgepeer_pb2.AddPeerRequest, context: Any
    ) -> edgepeer_pb2.AddPeerResponse:
        """Schedule a dial (static: keep redialling)."""
        peer_id, connected = self._edge.add_peer(
            request.enode, static=request.static_peer, trusted=request.trusted
        )
        return edgepeer_pb2.AddPeerResponse(peer_id=peer_id, already_connected=connected)

    async def RemovePeer(  # noqa: N802 - gRPC method name
        self, request: edgepeer_pb2.RemovePeerRequest, context: Any
    ) -> edgepeer_pb2.RemovePeerResponse:
        """Disconnect (0x00) and forget as static; idempotent."""
        target = request.WhichOneof("target")
        was_connected, was_static = await self._edge.remove_peer(
            enode=request.enode if target == "enode" else None,
            peer_id=request.peer_id if target == "peer_id" else None,
        )
        return edgepeer_pb2.RemovePeerResponse(was_connected=was_connected, was_static=was_static)

    async def SetTrusted(  # noqa: N802 - gRPC method name
        self, request: edgepeer_pb2.SetTrustedRequest, context: Any
    ) -> edgepeer_pb2.SetTrustedResponse:
        """(Un)trust by enode or node ID, connected or not."""
        target = request.WhichOneof("target")
        connected = self._edge.set_trusted(
            enode=request.enode if target == "enode" else None,
            peer_id=request.peer_id if target == "peer_id" else None,
            trusted=request.trusted,
        )
        return edgepeer_pb2.SetTrustedResponse(connected=connected)
