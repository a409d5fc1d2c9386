"""The edge peer's domain object: the waku node, the devp2p server, trust, the feed and the ingest forwarder.

:class:`EdgePeer` owns the lifecycle (start: node loops, ingest stream, devp2p listener, static peers,
bootnodes; stop: devp2p Disconnect 0x08 to everyone, node loops, feed, ingest flush) and offers what the
servicer needs: publish, peers, node info, add/remove peer, trust. No gRPC, no protos.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import trace

from devp2p.enode import Enode, format_enode, parse_enode
from devp2p.errors import DevP2PError, DisconnectReason, InvalidEnode
from devp2p.server import Server
from meshcore.errors import InvalidArgument
from meshcore.tracing import parse_traceparent
from services.edge_peer.feed import LiveFeed
from services.edge_peer.forwarder import IngestForwarder
from services.edge_peer.mailserver_bridge import MailserverBridge
from wakucodec.bloom import FULL_BLOOM
from wakucodec.envelope import Envelope
from wakucodec.keccak import keccak256
from wakunode.node import WakuNode
from wakunode.peerstate import PeerInfo
from wakunode.publish import PublishResult, PublishStatus

__all__ = ["EdgePeer", "NodeFacts", "PeerView", "TrustDirectory", "invalid_peer"]

log = logging.getLogger(__name__)
_PREFERENCE = ("waku/1", "waku/0", "shh/6")


def _envelope_spans(
    traceparents: Sequence[str], tracer_provider: trace.TracerProvider | None
) -> dict[int, trace.Span]:
    """A started ``publish envelope`` span per position whose traceparent parses, each linked to the
    current span (None provider: the global one)."""
    carrier = trace.get_current_span().get_span_context()
    links = [trace.Link(carrier)] if carrier.is_valid else []
    tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)  # once per call, not per envelope
    spans: dict[int, trace.Span] = {}
    for index, value in enumerate(traceparents):
        if (parent := parse_traceparent(value)) is not None:
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
            spans[index] = tracer.start_span("publish envelope", context=context, links=links)
    return spans


def invalid_peer(field: str, problem: str) -> InvalidArgument:
    """INVALID_ARGUMENT (INVALID_FIELD) for a bad enode or peer id."""
    return InvalidArgument(f"{field}: {problem}", {"reason": "INVALID_FIELD", "field": field})


class TrustDirectory:
    """Trusted peers by public key *or* node ID (SetTrusted may name a peer by its 32-byte ID only), and the
    server's static peers; the node consults it (wakunode ``PeerDirectory``)."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._ids: set[bytes] = set()

    def set_trusted(self, *, pubkey: bytes | None, node_id: bytes, trusted: bool) -> None:
        """(Un)trust a peer; the devp2p server also learns it when the public key is known."""
        (self._ids.add if trusted else self._ids.discard)(node_id)
        if pubkey is not None:
            self._server.set_trusted(pubkey, trusted)

    def is_trusted(self, pubkey: bytes) -> bool:
        """Trusted by key (server) or by node ID."""
        return self._server.is_trusted(pubkey) or (bool(self._ids) and keccak256(pubkey) in self._ids)

    def is_trusted_id(self, node_id: bytes) -> bool:
        """Trusted by node ID."""
        return node_id in self._ids

    @property
    def static_peers(self) -> tuple[bytes, ...]:
        """Public keys of the server's static peers."""
        return self._server.static_peers


@dataclass(frozen=True, slots=True)
class PeerView:
    """One connected remote for ListPeers (its preferred session; counters summed over its sessions)."""

    info: PeerInfo
    enode: str
    envelopes_received: int
    envelopes_sent: int


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What NodeInfo reports."""

    enode: str
    node_id: bytes
    listen_address: str
    capabilities: tuple[str, ...]
    pow_requirement: float
    bloom: bytes
    light_node: bool
    max_message_size: int
    client_id: str
    peer_count: int
    max_peers: int
    started_at: float
    instance: str


class EdgePeer:
    """Node + server + feed + forwarder, started and stopped together."""

    def __init__(
        self,
        node: WakuNode,
        server: Server,
        feed: LiveFeed,
        forwarder: IngestForwarder,
        history: MailserverBridge | None,
        *,
        instance: str,
        static_peers: Sequence[str] = (),
        bootnodes: Sequence[str] = (),
        trusted_peers: Sequence[str] = (),
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.node = node
        self._tracer_provider = tracer_provider
        self.server = server
        self.feed = feed
        self.forwarder = forwarder
        self.history = history
        self.instance = instance
        self.directory = TrustDirectory(server)
        node.attach(self.directory)
        self._static = tuple(static_peers)
        self._bootnodes = tuple(bootnodes)
        self._trusted = tuple(trusted_peers)
        self._dials: set[asyncio.Task[None]] = set()
        self.started_at = time.time()
        self._stopped = False

    # --- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the ingest stream, the node's loops, the devp2p listener; dial static peers and bootnodes."""
        self.started_at = time.time()
        self.forwarder.start()
        await self.node.start()
        await self.server.start()
        for url in self._trusted:
            node = parse_enode(url)
            self.directory.set_trusted(pubkey=node.pubkey, node_id=node.id_hash, trusted=True)
        for url in self._static:
            self.server.add_static_peer(url)
        for url in self._bootnodes:
            self._dial_later(parse_enode(url))
        log.info(
            "edge peer listening on %s",
            self.server.enode,
            extra={"enode": self.server.enode, "devp2p_port": self.server.port},
        )

    async def stop_intake(self) -> None:
        """Shutdown step 1: Disconnect 0x08 to every peer, stop the node's loops, end live streams."""
        if self._stopped:
            return
        self._stopped = True
        for task in self._dials:
            task.cancel()
        await asyncio.gather(*self._dials, return_exceptions=True)
        await self.server.stop()
        await self.node.stop()
        self.feed.close()

    async def close(self, flush_timeout: float) -> None:
        """Shutdown step 2 (after the gRPC drain): flush the ingest buffer within ``flush_timeout`` s."""
        await self.stop_intake()
        await self.forwarder.close(flush_timeout)

    # --- publishing ----------------------------------------------------------------------------------

    async def publish(
        self,
        envelopes: Sequence[bytes | Envelope],
        *,
        ephemeral: bool,
        relay_timeout: float,
        traceparents: Sequence[str] = (),
    ) -> list[PublishResult]:
        """Validate, cache, feed/forward and relay (wakunode publish).

        ``traceparents[i]`` is the trace context envelopes[i] came with: such an envelope gets a ``publish
        envelope`` span in that trace, linked to the current span (the call that carried it), so a caller
        sharing one call between many traces still sees its envelope reach the edge peer (OpenTelemetry
        semantic conventions for messaging spans, "Trace structure"). Values that do not parse are ignored.
        """
        spans = _envelope_spans(traceparents, self._tracer_provider)
        try:
            results = await self.node.publish(envelopes, ephemeral=ephemeral, relay_timeout=relay_timeout)
        except BaseException as err:
            for span in spans.values():
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(err).__name__))
                span.end()
            raise
        for index, span in spans.items():
            result = results[index]
            span.set_attributes(
                {
                    "mailmesh.envelope_hash": result.hash.hex(),
                    "mailmesh.publish_status": result.status.name.lower(),
                    "mailmesh.relayed_to": result.relayed_to,
                }
            )
            if result.status is PublishStatus.REJECTED:
                span.set_status(trace.Status(trace.StatusCode.ERROR, result.error or "rejected"))
            span.end()
        return results

    # --- peers ---------------------------------------------------------------------------------------

    def _enode_of(self, info: PeerInfo) -> str:
        peer = self.server.get_peer(info.pubkey)
        host, port = info.remote_address or ("0.0.0.0", 0)
        if info.inbound and peer is not None and peer.hello.listen_port:
            port = peer.hello.listen_port  # the remote's listening port, not its ephemeral source port
        return format_enode(info.pubkey, host, port or 30303)

    def peers(self) -> list[PeerView]:
        """Every remote with a completed waku/shh handshake, oldest first, one entry per remote."""
        by_key: dict[bytes, list[PeerInfo]] = {}
        for info in self.node.peers():
            by_key.setdefault(info.pubkey, []).append(info)
        views = []
        for sessions in by_key.values():
            best = min(sessions, key=lambda s: _PREFERENCE.index(s.capability))
            views.append(
                PeerView(
                    info=best,
                    enode=self._enode_of(best),
                    envelopes_received=sum(s.envelopes_received for s in sessions),
                    envelopes_sent=sum(s.envelopes_sent for s in sessions),
                )
            )
        views.sort(key=lambda v: min(s.connected_since for s in by_key[v.info.pubkey]))
        return views

    def is_trusted(self, pubkey: bytes) -> bool:
        """Whether the peer is trusted (by key or ID)."""
        return self.directory.is_trusted(pubkey)

    def facts(self) -> NodeFacts:
        """Our identity and advertised settings."""
        cfg, server = self.node.config, self.server
        host = server.config.host
        listen = f"[{host}]:{server.port}" if ":" in host else f"{host}:{server.port}"
        options = self.node.status_options
        return NodeFacts(
            enode=server.enode,
            node_id=keccak256(server.pubkey),
            listen_address=listen,
            capabilities=cfg.capabilities,
            pow_requirement=options.pow_requirement or 0.0,
            bloom=options.bloom or FULL_BLOOM,
            light_node=bool(options.light_node),
            max_message_size=cfg.max_message_size,
            client_id=server.config.client_id,
            peer_count=len({p.pubkey for p in self.node.peers()}),
            max_peers=server.config.max_peers,
            started_at=self.started_at,
            instance=self.instance,
        )

    def _dial_later(self, node: Enode) -> None:
        async def dial() -> None:
            try:
                await self.server.dial(node)
            except (DevP2PError, OSError) as err:
                log.info("dial %s:%d failed: %s", node.host, node.port, err)

        task = asyncio.get_running_loop().create_task(dial(), name="edge-dial")
        self._dials.add(task)
        task.add_done_callback(self._dials.discard)

    @staticmethod
    def parse(url: str) -> Enode:
        """Parse an enode URL or raise INVALID_ARGUMENT (INVALID_FIELD enode)."""
        try:
            return parse_enode(url)
        except InvalidEnode as err:
            raise invalid_peer("enode", str(err)) from err

    def add_peer(self, url: str, *, static: bool, trusted: bool) -> tuple[bytes, bool]:
        """Schedule a dial (or keep it static); return (node ID, already connected)."""
        node = self.parse(url)
        if trusted:
            self.directory.set_trusted(pubkey=node.pubkey, node_id=node.id_hash, trusted=True)
        connected = self.server.get_peer(node.pubkey) is not None
        if static:
            self.server.add_static_peer(node)
        elif not connected:
            self._dial_later(node)
        return node.id_hash, connected

    def _resolve(self, *, enode: str | None, peer_id: bytes | None) -> tuple[bytes | None, bytes]:
        """(public key if known, node ID) of a peer named by enode or ID."""
        if enode is not None:
            node = self.parse(enode)
            return node.pubkey, node.id_hash
        if peer_id is None:
            raise invalid_peer("target", "give an enode or a peer_id")
        if len(peer_id) != 32:
            raise invalid_peer("peer_id", f"must be 32 bytes, got {len(peer_id)}")
        peer = self.server.get_peer(peer_id)
        if peer is not None:
            return peer.remote_id, peer_id
        static = next((k for k in self.server.static_peers if keccak256(k) == peer_id), None)
        return static, peer_id

    async def remove_peer(self, *, enode: str | None, peer_id: bytes | None) -> tuple[bool, bool]:
        """Disconnect (0x00) and unstatic a peer; return (was connected, was static). Idempotent."""
        pubkey, _ = self._resolve(enode=enode, peer_id=peer_id)
        if pubkey is None:
            return False, False
        was_static = await self.server.remove_static_peer(pubkey, disconnect=False)
        peer = self.server.get_peer(pubkey)
        if peer is not None:
            with contextlib.suppress(DevP2PError):
                await peer.disconnect(DisconnectReason.REQUESTED)
        return peer is not None, was_static

    def set_trusted(self, *, enode: str | None, peer_id: bytes | None, trusted: bool) -> bool:
        """(Un)trust a peer by enode or ID, connected or not; return whether it is connected now."""
        pubkey, node_id = self._resolve(enode=enode, peer_id=peer_id)
        self.directory.set_trusted(pubkey=pubkey, node_id=node_id, trusted=trusted)
        return pubkey is not None and self.server.get_peer(pubkey) is not None
