"""The devp2p server ("peer pool"): listener, dialler, limits, static peers, graceful shutdown.

Per inbound connection, cheapest check first (docs/design.md "Limits and defences"):

1. shutting down / per-IP throttle / pending-handshake limit → close without a word (geth
   ``checkInboundConn``; no session exists yet), counted in ``stats.rejected``;
2. encryption handshake, then (geth ``postHandshakeChecks``) too many peers → 0x04, already connected → 0x05,
   connected to self → 0x0a, sent before Hello;
3. Hello exchange with identity checks (0x07 / 0x09), then no shared capability → 0x03 (``addPeerChecks``);
4. the session runs in :class:`~devp2p.peer.Peer` until either side disconnects.

Steps 1–3 run within the handshake timeout. Dials go through steps 2–4. Static peers are redialled with
exponential backoff while they are not connected. :meth:`Server.stop` sends Disconnect 0x08 (quitting) to
every peer. Trusted peers are exempt from the peer limit, as in geth (the throttle runs before the remote's
key is known, so it applies to everyone outside the LAN).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from types import TracebackType

from devp2p import constants as c
from devp2p.abc import SubProtocol
from devp2p.capabilities import CapabilityTable
from devp2p.config import ServerConfig
from devp2p.connection import Connection, establish
from devp2p.enode import Enode, format_enode, parse_enode
from devp2p.errors import (
    ConnectionLost,
    DevP2PError,
    DisconnectReason,
    HandshakeError,
    HandshakeTimeout,
    PeerDisconnected,
    PlainHandshakeRefused,
    reason_name,
)
from devp2p.hello import HelloPayload
from devp2p.p2p import loggable
from devp2p.peer import Peer, SessionEnd
from devp2p.stats import InboundThrottle, ServerStats
from devp2p.transport import StreamTransport, open_connection
from wakucodec import secp

__all__ = ["Server"]

log = logging.getLogger(__name__)


class Server:
    """A devp2p node: accepts and dials RLPx sessions and hands them to the subprotocol handlers.

    ::

        server = Server(node_key, [WakuV1(...), WakuV0(...)], ServerConfig(port=30303))
        await server.start()
        print(server.enode)
        peer = await server.dial("enode://…@10.0.0.5:30303")
        ...
        await server.stop()          # Disconnect 0x08 to everyone
    """

    def __init__(
        self, node_key: bytes, protocols: Sequence[SubProtocol], config: ServerConfig | None = None
    ) -> None:
        self.config = config or ServerConfig()
        self.node_key = secp.validate_private_key(node_key)
        #: Our 64-byte public key (the node id in our enode URL).
        self.pubkey = secp.public_key(self.node_key)
        self.protocols = tuple(protocols)
        #: Counters for every accept, rejection and disconnect.
        self.stats = ServerStats()
        self._throttle = InboundThrottle(
            self.config.inbound_throttle, exempt_lan=self.config.throttle_exempt_lan
        )
        self._peers: dict[bytes, Peer] = {}
        self._trusted: set[bytes] = set()
        self._static: dict[bytes, asyncio.Task[None]] = {}
        self._handshakes: set[asyncio.Task[object]] = set()  # inbound connections before their session
        self._pending: set[StreamTransport] = set()  # their transports, aborted on stop()
        self._sessions: set[asyncio.Task[None]] = set()
        self._pending_inbound = 0
        self._listener: asyncio.Server | None = None
        self._port = 0
        self._closing = False

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start listening (unless ``config.listen`` is False)."""
        if self.config.listen and self._listener is None:
            self._listener = await asyncio.start_server(self._on_inbound, self.config.host, self.config.port)
            self._port = self._listener.sockets[0].getsockname()[1]
            log.info("devp2p listening on %s", self.enode)

    async def stop(self) -> None:
        """Stop listening and redialling, send Disconnect 0x08 to every peer, wait for all tasks."""
        self._closing = True
        if self._listener is not None:
            self._listener.close()
        for task in self._static.values():
            task.cancel()
        for transport in list(self._pending):  # inbound handshakes in flight: drop them (as geth does)
            transport.abort()
        await asyncio.gather(*(p.disconnect(DisconnectReason.QUITTING) for p in list(self._peers.values())))
        await asyncio.gather(
            *self._handshakes, *self._sessions, *self._static.values(), return_exceptions=True
        )
        self._static.clear()
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # --- identity and state ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port (useful with ``port=0``); 0 when not listening."""
        return self._port

    @property
    def enode(self) -> str:
        """Our enode URL with the advertised host and the bound port."""
        host = self.config.advertised_host or self.config.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return format_enode(self.pubkey, host, self._port)

    @property
    def hello(self) -> HelloPayload:
        """The Hello we send."""
        caps = tuple(p.capability for p in self.protocols)
        return HelloPayload(c.P2P_VERSION, self.config.client_id, caps, self._port, self.pubkey)

    @property
    def peers(self) -> tuple[Peer, ...]:
        """Connected peers, oldest first."""
        return tuple(self._peers.values())

    def get_peer(self, node_id: bytes) -> Peer | None:
        """The connected peer with this 64-byte public key or 32-byte id hash, if any."""
        if len(node_id) == c.PUBKEY_LENGTH:
            return self._peers.get(node_id)
        return next((p for p in self._peers.values() if p.remote_id_hash == node_id), None)

    def set_trusted(self, pubkey: bytes, trusted: bool) -> None:
        """Mark a 64-byte public key (not) trusted: trusted peers skip the peer limit and the throttle."""
        (self._trusted.add if trusted else self._trusted.discard)(pubkey)

    def is_trusted(self, pubkey: bytes) -> bool:
        """Whether the public key was marked trusted."""
        return pubkey in self._trusted

    @property
    def static_peers(self) -> tuple[bytes, ...]:
        """Public keys of the static peers."""
        return tuple(self._static)

    # --- checks ----------------------------------------------------------------------------------------

    def _check_remote(self, pubkey: bytes) -> DisconnectReason | None:
        """geth ``postHandshakeChecks``, in its order."""
        if pubkey not in self._trusted and len(self._peers) >= self.config.max_peers:
            return DisconnectReason.TOO_MANY_PEERS
        if pubkey in self._peers:
            return DisconnectReason.ALREADY_CONNECTED
        if pubkey == self.pubkey:
            return DisconnectReason.SELF
        return None

    def _record_failure(self, err: BaseException) -> None:
        """Count a connection that did not become a session."""
        if not isinstance(err, PeerDisconnected):
            self.stats.errors[type(err).__name__] += 1
        if isinstance(err, PeerDisconnected):
            if err.remote:
                self.stats.disconnects_received[reason_name(err.reason)] += 1
            else:
                self.stats.disconnects_sent[reason_name(err.reason)] += 1
            self.stats.rejected[reason_name(err.reason)] += 1
        elif isinstance(err, PlainHandshakeRefused):
            self.stats.rejected["plain_handshake"] += 1
        elif isinstance(err, HandshakeTimeout):
            self.stats.rejected["handshake_timeout"] += 1
        elif isinstance(err, HandshakeError):
            self.stats.rejected["handshake_failed"] += 1
        elif isinstance(err, ConnectionLost):
            self.stats.rejected["connection_lost"] += 1
        elif isinstance(err, DevP2PError) and err.disconnect_reason is not None:
            self.stats.disconnects_sent[reason_name(err.disconnect_reason)] += 1
            self.stats.rejected[reason_name(err.disconnect_reason)] += 1
        else:
            self.stats.rejected["handshake_failed"] += 1

    def _record_end(self, end: SessionEnd) -> None:
        name = reason_name(end.reason)
        if end.error is not None:
            self.stats.errors[type(end.error).__name__] += 1
        if not end.remote:
            self.stats.disconnects_sent[name] += 1
        elif end.error is None:  # the remote sent a Disconnect (not just a dropped connection)
            self.stats.disconnects_received[name] += 1

    # --- sessions --------------------------------------------------------------------------------------

    async def _start_session(self, conn: Connection, hello: HelloPayload, *, inbound: bool) -> Peer:
        """Final checks (no await between check and registration), then run the peer in a task."""
        reason = self._check_remote(conn.remote_pubkey)
        table = CapabilityTable.negotiate(self.protocols, hello.capabilities)
        if reason is None and self.protocols and not table:
            reason = DisconnectReason.USELESS_PEER
        if reason is None and self._closing:
            reason = DisconnectReason.QUITTING
        if reason is not None:
            await conn.send_disconnect(reason)
            await conn.close()
            raise PeerDisconnected(reason, remote=False, detail="refused after Hello")
        peer = Peer(conn, hello, table, inbound=inbound)
        self._peers[conn.remote_pubkey] = peer
        self.stats.sessions += 1
        log.info(
            "peer connected: %s %s %s caps=%s",
            "in" if inbound else "out",
            conn.remote_pubkey.hex()[:16],
            peer.client_id,
            ",".join(loggable(str(cap), 32) for cap in table.capabilities),
        )
        task = asyncio.get_running_loop().create_task(self._serve(peer), name="devp2p-peer")
        self._sessions.add(task)
        task.add_done_callback(self._sessions.discard)
        return peer

    async def _serve(self, peer: Peer) -> None:
        try:
            end = await peer.run()
        finally:
            if self._peers.get(peer.remote_id) is peer:
                del self._peers[peer.remote_id]
        self._record_end(end)
        log.info(
            "peer disconnected: %s %s (%s)",
            peer.remote_id.hex()[:16],
            peer.client_id,
            reason_name(end.reason),
        )

    async def _on_inbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = StreamTransport(reader, writer)
        self.stats.inbound_accepted += 1
        host = transport.remote_address[0] if transport.remote_address else ""
        refusal = None
        if self._closing:
            refusal = "shutting_down"
        elif not self._throttle.allow(host):
            refusal = "throttled"
        elif self._pending_inbound >= self.config.max_pending_peers:
            refusal = "pending_limit"
        if refusal is not None:
            self.stats.rejected[refusal] += 1
            transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._handshakes.add(task)
        self._pending.add(transport)
        self._pending_inbound += 1
        try:
            conn, hello = await establish(
                transport, self.node_key, self.hello, self.config.session, check=self._check_remote
            )
            await self._start_session(conn, hello, inbound=True)
        except (DevP2PError, OSError) as err:
            self._record_failure(err)
            log.debug("inbound connection from %s failed: %s", host, err)
        except Exception as err:  # a bug must cost one connection, never the listener
            self.stats.errors[type(err).__name__] += 1
            log.exception("inbound connection from %s: unexpected error", host)
        finally:
            self._pending_inbound -= 1
            self._pending.discard(transport)
            self._handshakes.discard(task)

    async def dial(self, target: Enode | str) -> Peer:
        """Connect to a node and run the session in the background; return the peer once Hello is done.

        Returns the existing peer if already connected. Raises ConnectionLost (TCP failure), HandshakeError,
        PeerDisconnected (refused by either side), ProtocolError and friends; each failure is counted.
        """
        node = parse_enode(target) if isinstance(target, str) else target
        existing = self._peers.get(node.pubkey)
        if existing is not None:
            return existing
        if self._closing:
            raise PeerDisconnected(DisconnectReason.QUITTING, remote=False, detail="server is stopping")
        self.stats.dials += 1
        try:
            transport = await open_connection(node.host, node.port, timeout=self.config.session.dial_timeout)
        except ConnectionLost as err:
            self.stats.rejected["dial_failed"] += 1
            self.stats.errors[type(err).__name__] += 1
            raise
        try:
            conn, hello = await establish(
                transport,
                self.node_key,
                self.hello,
                self.config.session,
                remote_pubkey=node.pubkey,
                check=self._check_remote,
            )
            return await self._start_session(conn, hello, inbound=False)
        except (DevP2PError, OSError) as err:
            self._record_failure(err)
            raise

    # --- static peers ----------------------------------------------------------------------------------

    def add_static_peer(self, target: Enode | str) -> Enode:
        """Keep a session with ``target``: dial it now and redial whenever it is not connected."""
        node = parse_enode(target) if isinstance(target, str) else target
        if node.pubkey not in self._static and not self._closing:
            task = asyncio.get_running_loop().create_task(self._keep_static(node), name="devp2p-static")
            self._static[node.pubkey] = task
        return node

    async def remove_static_peer(self, pubkey: bytes, *, disconnect: bool = True) -> bool:
        """Stop redialling; disconnect it (0x00 requested) if ``disconnect``. True if it was static."""
        task = self._static.pop(pubkey, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        peer = self._peers.get(pubkey)
        if disconnect and peer is not None:
            await peer.disconnect(DisconnectReason.REQUESTED)
        return task is not None

    async def _keep_static(self, node: Enode) -> None:
        cfg = self.config
        delay = cfg.static_redial_min
        while not self._closing:
            peer = self._peers.get(node.pubkey)
            if peer is None:
                try:
                    peer = await self.dial(node)
                except (DevP2PError, OSError) as err:
                    log.debug("static dial %s failed: %s", node.host, err)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, cfg.static_redial_max)
                    continue
            started = time.monotonic()
            await peer.wait_closed()
            # A session that lasted a while resets the backoff; a flapping one keeps growing it.
            delay = cfg.static_redial_min if time.monotonic() - started > cfg.static_redial_max else delay
            await asyncio.sleep(delay)
            delay = min(delay * 2, cfg.static_redial_max)
