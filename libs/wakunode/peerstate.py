"""Per-session state of a waku/shh peer, its forwarding filter, and the public :class:`PeerInfo` snapshot.

A remote that negotiated both shh/6 and waku/1 has two sessions (one per protocol, as geth/status-go run
whisper and waku as separate services); each has its own options, known-set membership and counters. Rate
limit buckets are shared per remote (see :mod:`wakunode.ratelimit`).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
from dataclasses import dataclass, field

from devp2p.abc import PeerAPI, SubProtocol
from wakucodec.bloom import is_full_bloom
from wakunode.cache import CachedEnvelope
from wakunode.constants import SHH_VERSION, WAKU_V0, WAKU_V1
from wakunode.status_options import StatusOptions

__all__ = ["Flavor", "PeerInfo", "WakuPeer"]

_session_ids = itertools.count(1)


class Flavor(enum.Enum):
    """Which of the three protocols a session speaks."""

    WAKU1 = ("waku", WAKU_V1)
    WAKU0 = ("waku", WAKU_V0)
    SHH6 = ("shh", SHH_VERSION)

    @property
    def capability(self) -> str:
        """``"waku/1"``, ``"waku/0"`` or ``"shh/6"``."""
        name, version = self.value
        return f"{name}/{version}"

    @property
    def is_shh(self) -> bool:
        """True for shh/6 (geth semantics: single-envelope 0x7e/0x7f, codes 2 and 3)."""
        return self is Flavor.SHH6


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """A snapshot of one handshaken session, for ``ListPeers`` and health."""

    pubkey: bytes
    """64-byte public key."""
    node_id: bytes
    """32-byte node ID (keccak256 of the public key)."""
    capability: str
    """``"waku/1"``, ``"waku/0"`` or ``"shh/6"``."""
    remote_address: tuple[str, int] | None
    """Remote socket address."""
    inbound: bool
    """True when the remote dialled us."""
    client_id: str
    """Trimmed client name from Hello."""
    snappy: bool
    """Snappy active on the session."""
    pow_requirement: float
    """The peer's PoW requirement."""
    bloom: bytes
    """The peer's bloom; empty when it uses topic interest."""
    topic_interest_count: int
    """Topics in its interest (0 in bloom mode)."""
    light_node: bool
    """Its light-node flag."""
    confirmations_enabled: bool
    """Its confirmations flag."""
    connected_since: float
    """UNIX time the subprotocol handshake completed."""
    trusted: bool
    """Whether we trust it (0x7f/0x7d accepted from it)."""
    static: bool
    """Whether it is one of the host's static peers."""
    envelopes_received: int
    """Valid envelopes received from it."""
    envelopes_sent: int
    """Envelopes the relay sent to it."""


@dataclass(eq=False)
class WakuPeer:
    """Mutable state of one session (owned by the node; touched only from the event loop)."""

    peer: PeerAPI
    """The devp2p peer."""
    protocol: SubProtocol
    """Our handler for this session (what :meth:`PeerAPI.send` is called with)."""
    flavor: Flavor
    """Which protocol."""
    session: int = field(default_factory=lambda: next(_session_ids))
    """Unique id (used in the cache's known-sets)."""
    options: StatusOptions | None = None
    """The peer's effective options (defaults applied) once its Status arrived."""
    handshake: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the peer's Status was accepted."""
    connected_since: float = 0.0
    """UNIX time of the handshake."""
    cursor: int = 0
    """Forwarding high-water mark: the cache sequence up to which this peer was considered."""
    sending: asyncio.Task[None] | None = None
    """The forwarding write in progress, if any (a slow peer is skipped, not waited for)."""
    envelopes_received: int = 0
    """Valid envelopes it sent us."""
    envelopes_sent: int = 0
    """Envelopes the relay wrote to it."""
    ip_violations: int = 0
    """Packet/byte limit violations by IP."""
    peer_violations: int = 0
    """Packet/byte limit violations by peer ID."""
    requests: asyncio.Queue[tuple[bytes, float]] | None = None
    """Pending 0x7e payloads (with their arrival time) for the mailserver worker."""
    request_worker: asyncio.Task[None] | None = None
    """The mailserver worker of this session."""
    # Forwarding filter, derived from options by apply_options().
    _pow: float = 0.0
    _full: bool = True
    _bloom: int = 0
    _topics: frozenset[bytes] | None = None

    @property
    def pubkey(self) -> bytes:
        """64-byte public key of the remote."""
        return self.peer.remote_id

    @property
    def ip(self) -> str | None:
        """Remote IP, when known."""
        address = self.peer.remote_address
        return address[0] if address else None

    @property
    def ready(self) -> bool:
        """Handshake done and the session not closing."""
        return self.handshake.is_set() and not self.peer.is_closed

    def apply_options(self, options: StatusOptions) -> None:
        """Adopt the peer's (merged, defaulted) options and rebuild the forwarding filter
        (protocol-notes §3.4, §3.8).

        The forwarding cursor is reset so envelopes the old filter held back are reconsidered.
        """
        self.options = options
        self._pow = options.pow_requirement or 0.0
        if options.topic_interest is not None:
            self._topics = frozenset(options.topic_interest)
            self._full = False
        else:
            self._topics = None
            self._full = is_full_bloom(options.bloom)
            self._bloom = int.from_bytes(options.bloom, "big") if options.bloom and not self._full else 0
        self.cursor = 0

    def admits(self, entry: CachedEnvelope) -> bool:
        """Whether the relay may send ``entry`` to this peer: PoW ≥ its requirement and its topic interest
        (if set) or bloom (full node = all) matches (SG ``broadcast``/``topicOrBloomMatch``)."""
        if entry.pow < self._pow:
            return False
        if self._topics is not None:
            return entry.envelope.topic in self._topics
        return self._full or (self._bloom | entry.bloom) == self._bloom

    def info(self, *, trusted: bool, static: bool) -> PeerInfo:
        """Snapshot for the host."""
        opts = self.options or StatusOptions()
        peer = self.peer
        return PeerInfo(
            pubkey=peer.remote_id,
            node_id=peer.remote_id_hash,
            capability=self.flavor.capability,
            remote_address=peer.remote_address,
            inbound=peer.inbound,
            client_id=peer.client_id,
            snappy=peer.snappy,
            pow_requirement=opts.pow_requirement or 0.0,
            bloom=b"" if opts.topic_interest is not None else (opts.bloom or b""),
            topic_interest_count=len(opts.topic_interest or ()),
            light_node=bool(opts.light_node),
            confirmations_enabled=bool(opts.confirmations),
            connected_since=self.connected_since,
            trusted=trusted,
            static=static,
            envelopes_received=self.envelopes_received,
            envelopes_sent=self.envelopes_sent,
        )
