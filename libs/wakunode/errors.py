"""Errors of the waku/whisper subprotocol layer, and which disconnect reason each one causes.

The devp2p peer ends a session when a handler raises (see ``devp2p.abc.SubProtocol``). geth's
``discReasonForError`` maps every error a whisper/waku handler returns (they are plain ``fmt.Errorf``
values) to ``DiscSubprotocolError`` (0x10), so the protocol violations below carry reason 0x10 while still
being :class:`devp2p.errors.ProtocolError` subclasses. The tree::

    WakuError
    ├── WakuProtocolError (also devp2p ProtocolError)   the peer broke the protocol → Disconnect 0x10
    │   ├── BadStatus           missing, malformed or invalid Status / options (protocol-notes §3.1, §3.4)
    │   ├── OversizedPacket     a packet larger than the max message size (§1.5)
    │   └── RateLimitExceeded   packet/byte limits exceeded more often than the tolerance (§4.7)
    ├── NotConnected            no waku/shh session with that peer (client and publish APIs)
    ├── RequestTimeout          the mailserver did not finish an answer in time (client)
    └── RequestFailed           the mailserver answered 0x7d ``ERROR=…`` (client); carries the text
"""

from __future__ import annotations

from typing import ClassVar

from devp2p.errors import DisconnectReason, ProtocolError

__all__ = [
    "BadStatus",
    "NotConnected",
    "OversizedPacket",
    "RateLimitExceeded",
    "RequestFailed",
    "RequestTimeout",
    "WakuError",
    "WakuProtocolError",
]


class WakuError(Exception):
    """Base class of every error raised by :mod:`wakunode`."""


class WakuProtocolError(WakuError, ProtocolError):
    """The remote broke the waku/whisper protocol; the session ends with 0x10 (``DiscSubprotocolError``)."""

    disconnect_reason: ClassVar[DisconnectReason | None] = DisconnectReason.SUBPROTOCOL_ERROR


class BadStatus(WakuProtocolError):
    """The handshake failed: no Status first, undecodable options, wrong version, NaN/Inf/negative PoW, a
    bloom that is not 0 or 64 bytes, more than 10 000 interest topics, or no Status within the timeout."""


class OversizedPacket(WakuProtocolError):
    """A packet larger than the max message size (geth/status-go "oversized message received")."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"oversized message received: {size} bytes, limit {limit}")
        #: The packet's (decompressed) payload size.
        self.size = size
        #: Our max message size.
        self.limit = limit


class RateLimitExceeded(WakuProtocolError):
    """The peer exceeded its packet or byte budget as often as the configured tolerance (§4.7)."""


class NotConnected(WakuError):
    """No completed waku/shh handshake with the given peer."""


class RequestTimeout(WakuError, TimeoutError):
    """A history request got no (complete) answer within its timeout."""


class RequestFailed(WakuError):
    """The mailserver refused a history request with a 0x7d ``ERROR=`` payload."""

    def __init__(self, request_id: bytes, text: str) -> None:
        super().__init__(f"mailserver refused request {request_id.hex()[:16]}…: {text[:200]}")
        #: The 32-byte request id.
        self.request_id = request_id
        #: The server's error text (status-go wording, e.g. "rate limit exceeded").
        self.text = text
