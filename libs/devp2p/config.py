"""Configuration of RLPx sessions and of the server: frozen dataclasses, one docstring per field.

Defaults are geth's (protocol-notes §5.7, §5.9; docs/design.md "Limits and defences"); tests shrink the
timeouts instead of sleeping. The edge-peer service builds these from its own ``Config.from_env()``; nothing
here reads the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devp2p import constants as c

__all__ = ["ServerConfig", "SessionConfig"]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """Per-connection timeouts (seconds) and size limits (bytes)."""

    handshake_timeout: float = c.HANDSHAKE_TIMEOUT
    """Encryption handshake + Hello exchange, in total (geth ``handshakeTimeout``)."""
    frame_read_timeout: float = c.FRAME_READ_TIMEOUT
    """Longest wait for the next complete frame once the session runs (geth ``frameReadTimeout``)."""
    frame_write_timeout: float = c.FRAME_WRITE_TIMEOUT
    """Longest wait for a write to drain (geth ``frameWriteTimeout``)."""
    ping_interval: float = c.PING_INTERVAL
    """Period of our Pings (geth ``pingInterval``)."""
    disconnect_write_timeout: float = c.DISCONNECT_WRITE_TIMEOUT
    """Longest wait for a Disconnect to be written before closing (geth ``discWriteTimeout``)."""
    dial_timeout: float = 15.0
    """TCP connect timeout for dials (geth ``defaultDialTimeout``)."""
    max_frame_size: int = c.MAX_FRAME_SIZE
    """Largest frame accepted once the session runs (compressed size); checked before reading the body."""
    max_message_size: int = c.SNAPPY_MAX_DECODED_SIZE
    """Largest message data accepted after snappy decoding; checked before decompressing."""
    max_handshake_packet_size: int = c.MAX_HANDSHAKE_PACKET_SIZE
    """Largest EIP-8 auth/ack ciphertext accepted; checked before reading the body."""
    protocol_queue_size: int = c.PROTOCOL_QUEUE_SIZE
    """Messages buffered per subprotocol before the read loop waits for its handler (backpressure)."""

    def __post_init__(self) -> None:
        for name in ("handshake_timeout", "frame_read_timeout", "frame_write_timeout", "ping_interval"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if not 0 < self.max_frame_size <= c.MAX_FRAME_SIZE:
            raise ValueError(f"max_frame_size must be in 1..{c.MAX_FRAME_SIZE}")
        if not 0 < self.max_message_size <= c.SNAPPY_MAX_DECODED_SIZE:
            raise ValueError(f"max_message_size must be in 1..{c.SNAPPY_MAX_DECODED_SIZE}")
        if self.protocol_queue_size < 1:
            raise ValueError("protocol_queue_size must be at least 1")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Listener, dialler and peer-pool settings."""

    host: str = "0.0.0.0"
    """Address to listen on."""
    port: int = c.DEFAULT_PORT
    """TCP port to listen on; 0 picks a free port (see ``Server.port``)."""
    listen: bool = True
    """False for a dial-only node."""
    advertised_host: str | None = None
    """Host put into our enode URL; defaults to ``host`` (or 127.0.0.1 when ``host`` is a wildcard)."""
    client_id: str = "mailmesh/v0.1.0/python"
    """Client name we send in Hello."""
    max_peers: int = c.DEFAULT_MAX_PEERS
    """Connected peers allowed (in + out); more get ``DiscTooManyPeers``. Trusted peers are exempt."""
    max_pending_peers: int = c.DEFAULT_MAX_PENDING_PEERS
    """Inbound connections allowed in the handshake phase at once; more are closed without a word."""
    inbound_throttle: float = c.INBOUND_THROTTLE_TIME
    """Seconds between inbound attempts from one IP (geth ``inboundThrottleTime``); 0 disables it."""
    throttle_exempt_lan: bool = True
    """Exempt loopback and private (LAN) addresses from the throttle, as geth does (``netutil.IsLAN``)."""
    static_redial_min: float = 1.0
    """First delay before redialling a static peer after a failed dial or a dropped session."""
    static_redial_max: float = 60.0
    """Cap of the exponential redial backoff."""
    session: SessionConfig = field(default_factory=SessionConfig)
    """Per-connection timeouts and limits."""

    def __post_init__(self) -> None:
        if self.max_peers < 0 or self.max_pending_peers < 1:
            raise ValueError("max_peers must be >= 0 and max_pending_peers >= 1")
        if not 0 <= self.port <= 65535:
            raise ValueError("port must be in 0..65535")
        if self.inbound_throttle < 0 or not 0 < self.static_redial_min <= self.static_redial_max:
            raise ValueError("bad throttle or redial settings")
