"""The node: shared state of the waku/1, waku/0 and shh/6 sessions of one devp2p server.

::

    node = WakuNode(NodeConfig(), sink=my_sink, history=my_backend)
    server = Server(node_key, node.protocols, ServerConfig(port=30303))
    node.attach(server)                   # trust and static peers come from the server
    async with node, server:
        results = await node.publish([envelope], relay_timeout=1.0)
        print(node.peers())

:class:`~wakunode.protocol.WakuSubProtocol` reaches the node through its session hooks (the
:class:`~wakunode.session_host.SessionHost` interface); the relay is :class:`~wakunode.relay.Relay`, the 0x7e
side :class:`~wakunode.mailserver.Mailserver`. Here: the session table, trust, rate limits, settings, API.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from types import TracebackType

from devp2p.abc import PeerAPI, SubProtocol
from devp2p.errors import DisconnectReason
from wakucodec.envelope import Envelope, encode_envelopes
from wakunode import constants as c
from wakunode.config import NodeConfig
from wakunode.confirmations import MessageResponse, batch_hash
from wakunode.errors import BadStatus, NotConnected, OversizedPacket, RateLimitExceeded
from wakunode.mailserver import Mailserver
from wakunode.metrics import MailserverMetrics, WakuMetrics
from wakunode.peerstate import Flavor, PeerInfo, WakuPeer
from wakunode.policy import announce, build_policy
from wakunode.ports import Clock, EnvelopeSink, HistoryBackend, P2PListener, PeerDirectory, SystemClock
from wakunode.protocol import WakuSubProtocol
from wakunode.publish import PublishResult, publish
from wakunode.ratelimit import PacketRateLimiter
from wakunode.relay import Relay
from wakunode.status_options import StatusOptions

__all__ = ["WakuNode"]

log = logging.getLogger(__name__)
_PREFERENCE = (Flavor.WAKU1, Flavor.WAKU0, Flavor.SHH6)


class WakuNode:
    """Shared state of every waku/shh session: relay, cache, rate limits, mailserver, trust."""

    def __init__(
        self,
        config: NodeConfig | None = None,
        sink: EnvelopeSink | None = None,
        history: HistoryBackend | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.config = config or NodeConfig()
        self.clock: Clock = clock or SystemClock()
        #: ``waku_*`` metrics.
        self.metrics = WakuMetrics()
        #: ``mailserver_*`` metrics.
        self.mailserver_metrics = MailserverMetrics()
        self._advertised = self.config.status_options()
        self._sessions: dict[tuple[bytes, str], WakuPeer] = {}
        self.relay = Relay(
            self.config,
            build_policy(self.config, self._advertised, None),
            self.metrics,
            self.clock,
            sink,
            self._forwardable,
        )
        #: The 0x7e side; None when no history backend was given (requests are then ignored).
        self.mailserver: Mailserver | None = None
        if history is not None:
            self.mailserver = Mailserver(self.config, history, self.mailserver_metrics, self.clock)
        self._limiter = PacketRateLimiter(self.config.rate_limiter) if self.config.rate_limiter else None
        flavors = {f.capability: f for f in Flavor}
        self._protocols = tuple(WakuSubProtocol(self, flavors[cap]) for cap in self.config.capabilities)
        self._trusted: set[bytes] = set()
        self._directory: PeerDirectory | None = None
        self.p2p_listener: P2PListener | None = None
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._loops: list[asyncio.Task[None]] = []
        self._tasks: set[asyncio.Task[None]] = set()  # status-timeout disconnects in flight
        self._confirmations: dict[bytes, asyncio.Future[MessageResponse]] = {}
        self._changed = asyncio.Event()

    # --- wiring --------------------------------------------------------------------------------------------

    @property
    def protocols(self) -> tuple[SubProtocol, ...]:
        """One :class:`SubProtocol` per configured capability, for ``devp2p.Server(key, node.protocols)``."""
        return self._protocols

    def attach(self, directory: PeerDirectory) -> None:
        """Consult ``directory`` (e.g. the devp2p ``Server``) for trusted and static peers."""
        self._directory = directory

    def is_trusted(self, pubkey: bytes) -> bool:
        """Trusted by :meth:`set_trusted` or by the attached directory."""
        return pubkey in self._trusted or (self._directory is not None and self._directory.is_trusted(pubkey))

    def set_trusted(self, pubkey: bytes, trusted: bool) -> None:
        """(Un)trust a 64-byte public key at the node level (0x7f/0x7d acceptance, rate-limit whitelist)."""
        (self._trusted.add if trusted else self._trusted.discard)(pubkey)

    def is_static(self, pubkey: bytes) -> bool:
        """Whether the attached directory lists the key as a static peer."""
        return self._directory is not None and pubkey in self._directory.static_peers

    @property
    def status_options(self) -> StatusOptions:
        """What we advertise now."""
        return self._advertised

    # --- lifecycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the forwarding (300 ms) and pruning (1 s) loops."""
        if self._loops:
            return
        loop = asyncio.get_running_loop()
        extra = self.mailserver.prune if self.mailserver is not None else None
        self._loops = [
            loop.create_task(self.relay.run_forwarding(), name="waku-forward"),
            loop.create_task(self.relay.run_pruning(extra), name="waku-prune"),
        ]

    async def stop(self) -> None:
        """Stop the loops, timers and mailserver workers (sessions end with the devp2p server)."""
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        pending = [*self._loops, *self._tasks]
        for session in self._sessions.values():
            pending.extend(t for t in (session.request_worker, session.sending) if t is not None)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._loops = []
        self._tasks.clear()

    async def __aenter__(self) -> WakuNode:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # --- peers ---------------------------------------------------------------------------------------------

    def _ready(self) -> list[WakuPeer]:
        return [s for s in self._sessions.values() if s.ready]

    def _forwardable(self) -> list[WakuPeer]:
        """The sessions the relay writes to: the preferred one per remote (waku/1 > waku/0 > shh/6), so a
        remote that negotiated shh/6 and waku/1 gets each envelope once."""
        best: dict[bytes, WakuPeer] = {}
        for session in self._ready():
            current = best.get(session.pubkey)
            if current is None or _PREFERENCE.index(session.flavor) < _PREFERENCE.index(current.flavor):
                best[session.pubkey] = session
        return list(best.values())

    def peers(self) -> list[PeerInfo]:
        """Every handshaken session, oldest first (a remote with shh/6 and waku/1 appears twice)."""
        sessions = sorted(self._ready(), key=lambda s: s.connected_since)
        return [s.info(trusted=self.is_trusted(s.pubkey), static=self.is_static(s.pubkey)) for s in sessions]

    def session(self, pubkey: bytes) -> WakuPeer | None:
        """The preferred ready session with a remote (waku/1, then waku/0, then shh/6)."""
        for flavor in _PREFERENCE:
            session = self._sessions.get((pubkey, flavor.value[0]))
            if session is not None and session.flavor is flavor and session.ready:
                return session
        return None

    async def wait_ready(self, pubkey: bytes, timeout: float) -> PeerInfo:
        """Wait until the preferred session with ``pubkey`` has finished its handshake; NotConnected if none.

        A remote offering both shh/6 and waku/1 runs two handshakes at once; whichever finishes first, this
        returns the preferred one (waku/1) unless its handshake fails or times out. Only when no handshake
        with a more preferred protocol is pending does a less preferred ready session do.
        """
        try:
            async with asyncio.timeout(timeout):
                while (session := self.session(pubkey)) is None or self._better_pending(session):
                    changed = self._changed
                    await changed.wait()
        except TimeoutError as err:
            if (session := self.session(pubkey)) is None:
                raise NotConnected(
                    f"no waku/shh handshake with {pubkey.hex()[:16]} within {timeout} s"
                ) from err
        return session.info(trusted=self.is_trusted(pubkey), static=self.is_static(pubkey))

    def _better_pending(self, session: WakuPeer) -> bool:
        """Whether a handshake with ``session``'s remote on a more preferred protocol is still under way."""
        rank = _PREFERENCE.index(session.flavor)
        return any(
            other.pubkey == session.pubkey
            and not other.ready
            and not other.peer.is_closed
            and _PREFERENCE.index(other.flavor) < rank
            for other in self._sessions.values()
        )

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # --- session hooks (the SessionHost interface WakuSubProtocol calls) -------------------------------

    @property
    def max_message_size(self) -> int:
        """Largest packet payload we accept, in bytes (``NodeConfig.max_message_size``)."""
        return self.config.max_message_size

    def open_session(self, peer: PeerAPI, protocol: SubProtocol, flavor: Flavor) -> WakuPeer:
        """Register a new session of ``peer`` on ``protocol`` and its rate-limit buckets."""
        session = WakuPeer(peer, protocol, flavor)
        self._sessions[(peer.remote_id, protocol.name)] = session
        if self._limiter is not None:
            self._limiter.register(peer.remote_id, session.ip, self.clock.monotonic())
        return session

    def session_for(self, peer: PeerAPI, protocol: SubProtocol) -> WakuPeer | None:
        """The session of exactly this ``peer`` object on ``protocol`` (not a newer one of its remote)."""
        session = self._sessions.get((peer.remote_id, protocol.name))
        return session if session is not None and session.peer is peer else None

    def close_session(self, peer: PeerAPI, protocol: SubProtocol) -> None:
        """Forget the session; stop its Status timer, request worker and pending write; wake waiters."""
        session = self.session_for(peer, protocol)
        if session is None:
            return
        del self._sessions[(peer.remote_id, protocol.name)]
        handle = self._timers.pop(session.session, None)
        if handle is not None:
            handle.cancel()
        for task in (session.request_worker, session.sending):
            if task is not None:
                task.cancel()
        # A cancelled task's frames refer back to the session: drop our references so the cycle does not wait
        # for a full garbage collection (which a busy edge peer rarely runs) to free the peer's buffers.
        session.request_worker = session.sending = None
        if self._limiter is not None:
            self._limiter.unregister(peer.remote_id, session.ip)
        self._notify()

    def arm_status_timer(self, session: WakuPeer) -> None:
        """Disconnect (0x10) unless the peer's Status arrives within ``NodeConfig.status_timeout``."""
        if session.handshake.is_set():
            return
        loop = asyncio.get_running_loop()
        self._timers[session.session] = loop.call_later(
            self.config.status_timeout, self._status_timeout, session
        )

    def _status_timeout(self, session: WakuPeer) -> None:
        self._timers.pop(session.session, None)
        if session.handshake.is_set() or session.peer.is_closed:
            return
        self.metrics.peer_disconnects["status_timeout"] += 1
        disconnect = session.peer.disconnect(DisconnectReason.SUBPROTOCOL_ERROR)
        task = asyncio.get_running_loop().create_task(disconnect)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def complete_handshake(self, session: WakuPeer) -> None:
        """Mark the session ready (after the light-peer check), stop its Status timer, wake waiters."""
        # Two light nodes are useless to each other: refused when we restrict them (6/WAKU1 §Light node).
        cfg = self.config
        if cfg.light_node and cfg.restrict_light_clients and session.options and session.options.light_node:
            self.metrics.peer_disconnects["both_light"] += 1
            raise BadStatus("peer is useless: two light client communication restricted")  # geth/status-go
        handle = self._timers.pop(session.session, None)
        if handle is not None:
            handle.cancel()
        session.connected_since = self.clock.time()
        session.handshake.set()
        self._notify()

    def check_packet(self, session: WakuPeer, payload: bytes) -> None:
        """Rate limits (protocol-notes §4.7), then the max message size (§1.5): raise to disconnect."""
        limiter = self._limiter
        if limiter is not None and not self._whitelisted(session.pubkey):
            self.metrics.rate_limits_processed_total += 1
            ip_exceeded, peer_exceeded = limiter.check(
                session.pubkey, session.ip, len(payload), self.clock.monotonic()
            )
            if ip_exceeded:
                self.metrics.rate_limits_exceeded_total["ip"] += 1
                session.ip_violations += 1
            if peer_exceeded:
                self.metrics.rate_limits_exceeded_total["peer_id"] += 1
                session.peer_violations += 1
            tolerance = limiter.config.tolerance
            if tolerance and max(session.ip_violations, session.peer_violations) >= tolerance:
                self.metrics.peer_disconnects["rate_limit"] += 1
                raise RateLimitExceeded(f"rate limits exceeded {tolerance} times")
        if len(payload) > self.config.max_message_size:
            self.metrics.peer_disconnects["oversized"] += 1
            raise OversizedPacket(len(payload), self.config.max_message_size)

    def _whitelisted(self, pubkey: bytes) -> bool:
        cfg = self.config.rate_limiter
        assert cfg is not None
        return (cfg.whitelist_trusted and self.is_trusted(pubkey)) or (
            cfg.whitelist_static and self.is_static(pubkey)
        )

    async def relay_messages(self, session: WakuPeer, payload: bytes) -> None:
        """Hand a Messages packet to the relay (:meth:`Relay.on_messages`)."""
        await self.relay.on_messages(session, payload)

    async def serve_history_request(self, session: WakuPeer, payload: bytes) -> None:
        """Queue a 0x7e for the mailserver; without a history backend, count it and ignore it."""
        if self.mailserver is None:
            self.metrics.ignored_packets["p2p_request_no_mailserver"] += 1
        else:
            await self.mailserver.enqueue(session, payload)

    def resolve_confirmation(self, response: MessageResponse) -> None:
        """Resolve the :meth:`expect_confirmation` future of ``response.batch_hash``, if any is waiting."""
        future = self._confirmations.get(response.batch_hash)
        if future is not None and not future.done():
            future.set_result(response)

    # --- settings ------------------------------------------------------------------------------------------

    async def update_settings(
        self,
        *,
        pow_requirement: float | None = None,
        bloom: bytes | None = None,
        topic_interest: tuple[bytes, ...] | None = None,
    ) -> None:
        """Change what we require and announce it: Status Update (waku) or codes 2/3 (shh). The previous
        values stay tolerated on receipt for ``SETTINGS_TOLERANCE_S`` (status-go ``tolerate``)."""
        update = StatusOptions(pow_requirement=pow_requirement, bloom=bloom, topic_interest=topic_interest)
        update.validate()
        previous = self._advertised
        self._advertised = previous.merged(update)
        self.relay.policy = build_policy(self.config, self._advertised, previous)
        asyncio.get_running_loop().call_later(c.SETTINGS_TOLERANCE_S, self._end_tolerance, self._advertised)
        for session in self._ready():
            with contextlib.suppress(Exception):
                await announce(session, update)

    def _end_tolerance(self, settled: StatusOptions) -> None:
        if self._advertised is settled:
            self.relay.policy = build_policy(self.config, settled, None)

    # --- publishing and direct sends -----------------------------------------------------------------------

    async def publish(
        self, envelopes: Sequence[Envelope | bytes], *, ephemeral: bool = False, relay_timeout: float = 0.0
    ) -> list[PublishResult]:
        """Validate like a received envelope (§1.5), cache, hand new ones to the sink (with ``ephemeral``),
        and let the relay forward them; wait up to ``relay_timeout`` seconds for every eligible peer to have
        them (see :mod:`wakunode.publish`). One result per input, in order."""
        return await publish(
            self.relay, self._forwardable, envelopes, ephemeral=ephemeral, relay_timeout=relay_timeout
        )

    async def send_messages(self, pubkey: bytes, envelopes: Sequence[Envelope]) -> bytes:
        """Write one Messages packet straight to a peer (client ``post``); return its batch hash (§3.6)."""
        session = self.session(pubkey)
        if session is None:
            raise NotConnected(f"no waku/shh session with {pubkey.hex()[:16]}")
        payload = encode_envelopes(envelopes)
        await session.peer.send(session.protocol, c.MESSAGES_CODE, payload)
        for env in envelopes:
            entry = self.relay.cache.get(env.hash)
            if entry is not None:
                entry.holders.add(session.session)
        return batch_hash(payload)

    def expect_confirmation(self, digest: bytes) -> asyncio.Future[MessageResponse]:
        """A future resolved by the Message Response (or Batch Ack) for ``digest``; cancel it when done."""
        future = asyncio.get_running_loop().create_future()
        self._confirmations[digest] = future
        future.add_done_callback(lambda _: self._confirmations.pop(digest, None))
        return future

    async def send_packet(self, pubkey: bytes, code: int, payload: bytes) -> Flavor:
        """Write any packet to a peer's preferred session; return that session's flavor."""
        session = self.session(pubkey)
        if session is None:
            raise NotConnected(f"no waku/shh session with {pubkey.hex()[:16]}")
        await session.peer.send(session.protocol, code, payload)
        return session.flavor
