"""The interface between the waku/shh :class:`~devp2p.abc.SubProtocol` and the node that owns its sessions.

:class:`~wakunode.protocol.WakuSubProtocol` is the wire side of one capability: it decodes Status packets
and dispatches by message code. Everything that outlives one packet — the session table, the Status timer,
rate limits, the relay, the mailserver, confirmation waiters, trust — belongs to the node
(:class:`~wakunode.node.WakuNode`). The subprotocol reaches the node only through :class:`SessionHost`, so
``protocol.py`` never imports ``node.py`` (the node builds its subprotocols, never the reverse) and a test
can drive a subprotocol against any host.

Call order, per session (devp2p runs ``on_start``, then ``handle`` per packet, then ``on_stop`` once)::

    on_start   open_session → (our Status is sent) → arm_status_timer
    handle     session_for → check_packet → before the handshake: complete_handshake (peer's Status)
                                          → after it: relay_messages | serve_history_request |
                                            resolve_confirmation | p2p_listener …
    on_stop    close_session

Nothing here is called from outside the library; hosts of the node use :mod:`wakunode.ports`.
"""

from __future__ import annotations

from typing import Protocol

from devp2p.abc import PeerAPI, SubProtocol
from wakunode.confirmations import MessageResponse
from wakunode.metrics import WakuMetrics
from wakunode.peerstate import Flavor, WakuPeer
from wakunode.ports import P2PListener
from wakunode.status_options import StatusOptions

__all__ = ["SessionHost"]


class SessionHost(Protocol):
    """What a :class:`~wakunode.protocol.WakuSubProtocol` needs from the node that owns its sessions.

    Sessions are keyed by ``(peer.remote_id, protocol.name)``: one per remote and protocol name, so a
    remote that negotiated shh/6 and waku/1 has two (geth and status-go run whisper and waku as separate
    services). Methods that raise end the devp2p session with the error's disconnect reason.
    """

    @property
    def metrics(self) -> WakuMetrics:
        """The ``waku_*`` counters the subprotocol adds to (disconnects, ignored and rejected packets)."""
        ...

    @property
    def status_options(self) -> StatusOptions:
        """What we advertise now: the subprotocol encodes it into our Status."""
        ...

    @property
    def max_message_size(self) -> int:
        """Largest packet payload we accept, in bytes (also the bound for the envelopes of a 0x7f)."""
        ...

    @property
    def p2p_listener(self) -> P2PListener | None:
        """Where 0x7f / 0x7d from trusted peers go (the client role); None when nobody listens."""
        ...

    def is_trusted(self, pubkey: bytes) -> bool:
        """Whether the 64-byte public key is trusted (0x7f / 0x7d only from those: 6/WAKU1 §P2P Message)."""
        ...

    # --- the session table -------------------------------------------------------------------------------

    def open_session(self, peer: PeerAPI, protocol: SubProtocol, flavor: Flavor) -> WakuPeer:
        """Register a new session of ``peer`` on ``protocol`` (speaking ``flavor``) and return its state."""
        ...

    def session_for(self, peer: PeerAPI, protocol: SubProtocol) -> WakuPeer | None:
        """The session of exactly this ``peer`` object on ``protocol``; None once it is closed or replaced."""
        ...

    def close_session(self, peer: PeerAPI, protocol: SubProtocol) -> None:
        """Forget the session and stop its timer, request worker and pending write (no-op if unknown)."""
        ...

    # --- the handshake and every packet --------------------------------------------------------------------

    def arm_status_timer(self, session: WakuPeer) -> None:
        """Disconnect the peer (0x10) unless its Status arrives within the configured Status timeout."""
        ...

    def check_packet(self, session: WakuPeer, payload: bytes) -> None:
        """Apply the packet/byte rate limits (6/WAKU1 §Status, ``rate-limits``) and the max message size.

        Raises :class:`~wakunode.errors.RateLimitExceeded` or :class:`~wakunode.errors.OversizedPacket`
        to disconnect the peer.
        """
        ...

    def complete_handshake(self, session: WakuPeer) -> None:
        """Mark the session ready once the peer's Status was applied to it; stop its Status timer.

        Raises :class:`~wakunode.errors.BadStatus` when the pair is useless (both light nodes while we
        restrict light clients, 6/WAKU1 §Light node).
        """
        ...

    # --- packets after the handshake -----------------------------------------------------------------------

    async def relay_messages(self, session: WakuPeer, payload: bytes) -> None:
        """Handle a Messages (0x01) packet: validate, cache, confirm and pass on its envelopes."""
        ...

    async def serve_history_request(self, session: WakuPeer, payload: bytes) -> None:
        """Queue a 0x7e request for the mailserver; count and ignore it when this node has none."""
        ...

    def resolve_confirmation(self, response: MessageResponse) -> None:
        """Resolve whoever waits for the confirmation of ``response.batch_hash``; a Batch Ack arrives as a
        response without errors (6/WAKU1 §Batch Ack, §Message Response). Unknown batches are ignored."""
        ...
