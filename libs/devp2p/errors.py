"""Errors raised by the devp2p/RLPx library, and the devp2p disconnect reasons.

Every failure below the subprotocol hook is one of these; wakucodec's ``CodecError`` (bad RLP, bad ECIES) is
translated at the boundary with ``raise X from err``, and ``OSError`` / ``IncompleteReadError`` become
:class:`ConnectionLost`. The tree::

    DevP2PError
    ├── HandshakeError            the RLPx encryption handshake (auth/ack) failed
    │   ├── PlainHandshakeRefused   a pre-EIP-8 ("plain") auth or ack: not supported (protocol-notes §5.2)
    │   └── HandshakeTimeout        handshake + Hello not done within the handshake timeout
    ├── FrameError                an RLPx frame that cannot be read
    │   └── BadMAC                  header or frame MAC mismatch (checked before decrypting)
    ├── MessageTooLarge           a size over a limit, detected before the bytes are read or allocated
    ├── MalformedMessage          frame data / snappy block / message RLP that does not decode
    ├── ProtocolError             the remote broke the devp2p rules; carries the reason we send
    │   ├── InvalidMessageCode      message id outside every negotiated range (0x02)
    │   ├── InvalidIdentity         Hello node id not 64 non-zero bytes (0x07)
    │   ├── UnexpectedIdentity      Hello node id differs from the handshake key (0x09)
    │   └── UselessPeer             no shared capability (0x03)
    ├── ConnectionLost            the transport closed, reset or hit EOF
    ├── ReadTimeout               no complete frame within the frame read timeout (0x0b)
    ├── WriteTimeout              a write did not drain within the frame write timeout
    ├── PeerDisconnected          the session ended; carries the reason and who sent it
    └── InvalidEnode              an enode URL that does not parse (also a ValueError)
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

__all__ = [
    "BadMAC",
    "ConnectionLost",
    "DevP2PError",
    "DisconnectReason",
    "FrameError",
    "HandshakeError",
    "HandshakeTimeout",
    "InvalidEnode",
    "InvalidIdentity",
    "InvalidMessageCode",
    "MalformedMessage",
    "MessageTooLarge",
    "PeerDisconnected",
    "PlainHandshakeRefused",
    "ProtocolError",
    "ReadTimeout",
    "UnexpectedIdentity",
    "UselessPeer",
    "WriteTimeout",
    "as_reason",
    "reason_name",
]


class DisconnectReason(IntEnum):
    """devp2p disconnect reasons: the codes of docs/protocol-notes.md §5.7 (geth ``DiscReason``)."""

    REQUESTED = 0x00
    """Disconnect requested (geth ``DiscRequested``)."""
    NETWORK_ERROR = 0x01
    """TCP sub-system error (``DiscNetworkError``)."""
    PROTOCOL_ERROR = 0x02
    """Breach of protocol, e.g. a malformed message or an invalid message code (``DiscProtocolError``)."""
    USELESS_PEER = 0x03
    """No shared capability (``DiscUselessPeer``)."""
    TOO_MANY_PEERS = 0x04
    """The peer limit is reached (``DiscTooManyPeers``)."""
    ALREADY_CONNECTED = 0x05
    """A session with this node id exists (``DiscAlreadyConnected``)."""
    INCOMPATIBLE_VERSION = 0x06
    """Incompatible p2p protocol version (``DiscIncompatibleVersion``)."""
    INVALID_IDENTITY = 0x07
    """Null node identity received (``DiscInvalidIdentity``)."""
    QUITTING = 0x08
    """Client quitting (``DiscQuitting``)."""
    UNEXPECTED_IDENTITY = 0x09
    """Hello identity differs from the handshake key (``DiscUnexpectedIdentity``)."""
    SELF = 0x0A
    """Connected to self (``DiscSelf``)."""
    READ_TIMEOUT = 0x0B
    """Ping/read timeout (``DiscReadTimeout``)."""
    SUBPROTOCOL_ERROR = 0x10
    """Subprotocol-specific reason; what geth sends when a protocol handler returns an error."""


def as_reason(reason: int) -> int:
    """Return the :class:`DisconnectReason` member for a known code, the plain int for an unknown one."""
    try:
        return DisconnectReason(reason)
    except ValueError:
        return reason


def reason_name(reason: int) -> str:
    """Return a stable, log- and metric-friendly name for a reason code, also for codes we do not know."""
    try:
        return DisconnectReason(reason).name.lower()
    except ValueError:
        return f"unknown_0x{reason:02x}"


class DevP2PError(Exception):
    """Base class of every error raised by :mod:`devp2p`.

    ``disconnect_reason`` is the devp2p reason we send to the remote when this error ends a session, or
    ``None`` when nothing should be sent (the transport is gone, or the remote ended the session).
    """

    disconnect_reason: ClassVar[DisconnectReason | None] = DisconnectReason.PROTOCOL_ERROR


class HandshakeError(DevP2PError):
    """The RLPx encryption handshake failed: undecryptable or malformed auth/ack, bad signature, EOF."""

    # Before the handshake completes there is no session to send a Disconnect over (geth just closes).
    disconnect_reason: ClassVar[DisconnectReason | None] = None


class PlainHandshakeRefused(HandshakeError):
    """The remote sent a pre-EIP-8 ("plain") auth or ack; like status-go's geth fork we accept only EIP-8."""


class HandshakeTimeout(HandshakeError):
    """The encryption handshake plus the Hello exchange did not finish within the handshake timeout."""

    # geth's read deadline expiry is a network error, so it sends nothing; we tell the remote why.
    disconnect_reason: ClassVar[DisconnectReason | None] = DisconnectReason.READ_TIMEOUT


class FrameError(DevP2PError):
    """An RLPx frame that cannot be read; the ingress cipher/MAC state is unusable afterwards."""


class BadMAC(FrameError):
    """The header MAC or frame MAC does not match; nothing was decrypted (protocol-notes §5.4)."""


class MessageTooLarge(DevP2PError):
    """A declared or actual size exceeds a limit; raised before the oversized body is read or allocated."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes, limit is {limit}")
        #: The declared or actual size.
        self.size = size
        #: The limit it exceeds.
        self.limit = limit


class MalformedMessage(DevP2PError):
    """Frame data, a snappy block or a base-protocol payload that does not decode."""


class ProtocolError(DevP2PError):
    """The remote broke a devp2p rule; ``disconnect_reason`` says which reason we answer with."""


class InvalidMessageCode(ProtocolError):
    """A message id outside every negotiated range ("msg code out of range" in geth)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"message code 0x{code:x} is outside every negotiated range")
        #: The offending wire message id.
        self.code = code


class InvalidIdentity(ProtocolError):
    """The Hello node id is not 64 non-zero bytes (geth ``readProtocolHandshake``)."""

    disconnect_reason: ClassVar[DisconnectReason | None] = DisconnectReason.INVALID_IDENTITY


class UnexpectedIdentity(ProtocolError):
    """The Hello node id differs from the public key proven in the encryption handshake."""

    disconnect_reason: ClassVar[DisconnectReason | None] = DisconnectReason.UNEXPECTED_IDENTITY


class UselessPeer(ProtocolError):
    """The remote shares no capability with us."""

    disconnect_reason: ClassVar[DisconnectReason | None] = DisconnectReason.USELESS_PEER


class ConnectionLost(DevP2PError):
    """The transport was closed, reset, or reached EOF in the middle of a read or write."""

    disconnect_reason: ClassVar[DisconnectReason | None] = None


class ReadTimeout(DevP2PError):
    """No complete frame arrived within the frame read timeout (geth ``frameReadTimeout``)."""

    disconnect_reason: ClassVar[DisconnectReason | None] = DisconnectReason.READ_TIMEOUT


class WriteTimeout(DevP2PError):
    """A write did not drain within the frame write timeout (geth ``frameWriteTimeout``)."""

    # The remote does not read, so a Disconnect would not drain either.
    disconnect_reason: ClassVar[DisconnectReason | None] = None


class PeerDisconnected(DevP2PError):
    """The session is over. ``reason`` is the raw code (a :class:`DisconnectReason` when known).

    ``remote`` is True when the remote sent the Disconnect, False when we ended the session.
    """

    disconnect_reason: ClassVar[DisconnectReason | None] = None

    def __init__(self, reason: int, *, remote: bool, detail: str = "") -> None:
        who = "remote" if remote else "local"
        suffix = f": {detail}" if detail else ""
        super().__init__(f"disconnected ({who}, {reason_name(reason)}){suffix}")
        #: Reason code as received or sent: a DisconnectReason member when the code is known, else the int.
        self.reason: int = as_reason(reason)
        #: Whether the remote sent the Disconnect.
        self.remote = remote


class InvalidEnode(DevP2PError, ValueError):
    """An enode URL that does not parse: scheme, 128-hex public key on the curve, host, port."""

    disconnect_reason: ClassVar[DisconnectReason | None] = None

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(f"invalid enode URL {url[:200]!r}: {problem}")
        #: The offending URL (as given).
        self.url = url
