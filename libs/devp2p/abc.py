"""The interfaces of the devp2p layers, in one place (house style anchor C, trinity ``p2p/abc.py``).

Layering, bottom up::

    TransportAPI        bytes in, bytes out (asyncio streams, or the in-memory pair for tests)
    handshake           EIP-8 auth/ack packets → Secrets                       (eip8.py, handshake.py)
    frame               AES-CTR + Keccak MAC framing; MacState is injectable    (frame.py)
    messages / p2p      RLP(msg-id) ‖ snappy(data); Hello, Disconnect, Ping, Pong (messages.py, p2p.py)
    capabilities        message-id offsets of the negotiated subprotocols       (capabilities.py)
    connection          one RLPx session: timeouts, write lock, Hello exchange  (connection.py)
    PeerAPI / SubProtocol  dispatch to subprotocol handlers                     (peer.py)
    server              listener, dialer, limits, static peers                  (server.py)

Subprotocols (waku/1, waku/0, shh/6) implement :class:`SubProtocol` and never touch the layers below it.

The interfaces depend on nothing concrete: the one devp2p module imported here is :mod:`devp2p.hello`, the
plain values a Hello carries, so the implementations (``p2p.py``'s commands, the peer, the server) import
this module and never the reverse (an import-linter contract in ``pyproject.toml`` keeps it so).
"""

from __future__ import annotations

import abc
from typing import ClassVar, Generic, Protocol, TypeVar

from devp2p.hello import Capability, HelloPayload

__all__ = ["Command", "MacState", "PeerAPI", "SubProtocol", "TransportAPI"]

PayloadT = TypeVar("PayloadT")


class MacState(Protocol):
    """A running Keccak-256 state whose ``digest()`` does not finalize it (protocol-notes §5.4).

    ``wakucodec.keccak.new_keccak256`` is the real one; tests inject a fake (geth ``TestRLPXFrameFake``).
    """

    def update(self, data: bytes | bytearray | memoryview, /) -> object:
        """Absorb ``data``."""

    def digest(self) -> bytes:
        """Return the current 32-byte digest without finalizing the state."""


class TransportAPI(abc.ABC):
    """A connected, ordered byte stream: what the RLPx layers read from and write to."""

    @abc.abstractmethod
    async def read_exactly(self, n: int) -> bytes:
        """Return exactly ``n`` bytes; raise :class:`~devp2p.errors.ConnectionLost` on EOF or reset."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Queue ``data`` for sending (never blocks); raise ConnectionLost if the transport is closed."""

    @abc.abstractmethod
    async def drain(self) -> None:
        """Wait until the send buffer is below its high-water mark (flow control)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Start a graceful close: queued data is still sent."""

    @abc.abstractmethod
    async def wait_closed(self) -> None:
        """Wait until the transport is fully closed."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Close immediately, dropping queued data."""

    @property
    @abc.abstractmethod
    def remote_address(self) -> tuple[str, int] | None:
        """The remote ``(host, port)``, when known."""

    @property
    @abc.abstractmethod
    def is_closing(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called or the remote closed."""


class Command(abc.ABC, Generic[PayloadT]):
    """One base-protocol command: its message id, payload type and codec (trinity ``BaseCommand``)."""

    #: Message id inside the protocol's range.
    code: ClassVar[int]

    @classmethod
    @abc.abstractmethod
    def encode(cls, payload: PayloadT) -> bytes:
        """Encode ``payload`` to the message data (RLP, before snappy)."""

    @classmethod
    @abc.abstractmethod
    def decode(cls, data: bytes) -> PayloadT:
        """Decode message data; raise :class:`~devp2p.errors.MalformedMessage` if it does not parse."""


class PeerAPI(abc.ABC):
    """A connected peer as subprotocol handlers see it."""

    @property
    @abc.abstractmethod
    def remote_id(self) -> bytes:
        """The remote's 64-byte public key (the enode "node id"), proven by the encryption handshake."""

    @property
    @abc.abstractmethod
    def remote_id_hash(self) -> bytes:
        """keccak256 of :attr:`remote_id` — geth's 32-byte ``enode.ID``."""

    @property
    @abc.abstractmethod
    def hello(self) -> HelloPayload:
        """The remote's Hello (its ``client_id`` is untrimmed: use :attr:`client_id` for logs)."""

    @property
    @abc.abstractmethod
    def client_id(self) -> str:
        """The remote's client id, trimmed and stripped of control characters (safe to log)."""

    @property
    @abc.abstractmethod
    def inbound(self) -> bool:
        """True when the remote dialled us."""

    @property
    @abc.abstractmethod
    def remote_address(self) -> tuple[str, int] | None:
        """The remote socket address, when known."""

    @property
    @abc.abstractmethod
    def snappy(self) -> bool:
        """Whether messages are snappy-compressed on this session (remote Hello version ≥ 5)."""

    @property
    @abc.abstractmethod
    def is_closed(self) -> bool:
        """Whether the session has ended (or is ending)."""

    @abc.abstractmethod
    async def send(self, protocol: SubProtocol | str, code: int, payload: bytes) -> None:
        """Send message ``code`` (local to ``protocol``) with RLP-encoded ``payload``.

        Raises :class:`~devp2p.errors.PeerDisconnected` if the session is over, ValueError if ``code`` is
        not below the protocol's length or the protocol was not negotiated with this peer.
        """

    @abc.abstractmethod
    async def disconnect(self, reason: int) -> None:
        """Send Disconnect ``[reason]``, close the session and wait until every handler has stopped.

        Safe to call from a handler: the handler's task is cancelled while the session tears down.
        """


class SubProtocol(abc.ABC):
    """The hook a subprotocol (waku/1, waku/0, shh/6, …) implements to plug into a peer.

    One instance serves every peer; per-peer state is the implementation's business (key it by
    ``peer.remote_id``). For each peer that negotiates the capability, the peer runs one task that calls
    :meth:`on_start`, then :meth:`handle` for each message in arrival order, and :meth:`on_stop` once when
    the session ends. An exception from :meth:`on_start` or :meth:`handle` ends the session with
    ``0x10`` (subprotocol error), or ``0x02`` if it is a :class:`~devp2p.errors.ProtocolError` /
    :class:`~devp2p.errors.MalformedMessage`, as geth's ``discReasonForError`` does.
    """

    #: Capability name, e.g. ``"waku"``.
    name: str
    #: Capability version, e.g. ``1``.
    version: int
    #: Number of message ids the protocol uses (``128`` for waku and shh, §3.3).
    length: int

    @property
    def capability(self) -> Capability:
        """``(name, version)`` as advertised in Hello."""
        return Capability(self.name, self.version)

    async def on_start(self, peer: PeerAPI) -> None:  # noqa: B027 - optional hook, default no-op
        """Called once the devp2p session is up, before any message of this protocol is handled.

        Typically sends the subprotocol's Status. Messages arriving meanwhile are queued.
        """

    @abc.abstractmethod
    async def handle(self, peer: PeerAPI, code: int, payload: bytes) -> None:
        """Handle one message: ``code`` is local to this protocol (0 ≤ code < length), ``payload`` its
        decompressed RLP data. Unknown codes should be ignored, as geth's whisper/waku handlers do.

        To end the session with a specific reason, raise ``PeerDisconnected(reason, remote=False)`` or call
        ``await peer.disconnect(reason)``.
        """

    async def on_stop(self, peer: PeerAPI, reason: int) -> None:  # noqa: B027 - optional hook, default no-op
        """Called once when the session ends (for any reason), if :meth:`on_start` was called.

        The connection is already closed (sending raises PeerDisconnected); release per-peer state here.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}/{self.version}>"
