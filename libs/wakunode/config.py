"""Configuration of a :class:`~wakunode.node.WakuNode`: frozen dataclasses, one docstring per field.

Defaults are a mailserver's (docs/design.md "Protocol decisions"): full bloom, the minimal PoW requirement
status-go nodes use (0.000002), not a light node, no confirmations, rate limiting off (status-go's
``EnableRateLimiter`` default). The edge-peer service builds these from its own ``Config.from_env()``;
nothing here reads the environment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from wakucodec.bloom import FULL_BLOOM, is_full_bloom
from wakucodec.constants import BLOOM_SIZE, MAX_MESSAGE_SIZE, MAX_TOPIC_INTEREST, TOPIC_LENGTH
from wakunode.constants import (
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_SYNC_ALLOWANCE,
    EXPIRATION_CYCLE_S,
    STATUS_MIN_POW,
    TRANSMISSION_CYCLE_S,
)
from wakunode.status_options import RateLimits, StatusOptions

__all__ = ["CAPABILITIES", "MailserverConfig", "NodeConfig", "RateLimiterConfig"]

#: Every capability this library speaks, in preference order (docs/design.md "Protocol decisions": waku/1
#: preferred).
CAPABILITIES = ("waku/1", "waku/0", "shh/6")


@dataclass(frozen=True, slots=True)
class RateLimiterConfig:
    """Packet/byte token buckets on every waku/shh packet a peer sends
    (protocol-notes §4.7; SG ``rate_limiter.go``).

    Limits are per second and refill continuously; 0 disables that bucket. A packet over a limit is still
    processed (as in status-go) but counted in ``waku_rate_limits_exceeded_total{type}``; after
    ``tolerance`` violations the peer is disconnected (0x10). Defaults are status-go's library defaults.
    """

    packets_per_ip: int = 10
    """Packets per second from one remote IP (all its peers together)."""
    packets_per_peer: int = 5
    """Packets per second from one peer ID."""
    bytes_per_ip: int = 1024 * 1024
    """Payload bytes per second from one remote IP."""
    bytes_per_peer: int = 1024 * 1024
    """Payload bytes per second from one peer ID."""
    tolerance: int = 0
    """Violations (IP and peer counted separately) before the peer is dropped; 0 = never drop."""
    whitelist_trusted: bool = True
    """Trusted peers are not limited (status-go whitelists ``TrustedMailServers``)."""
    whitelist_static: bool = True
    """Static peers are not limited (status-go whitelists ``ClusterConfig.StaticNodes``)."""
    whitelisted_ips: tuple[str, ...] = ()
    """Remote IPs that are never limited."""

    def __post_init__(self) -> None:
        values = (self.packets_per_ip, self.packets_per_peer, self.bytes_per_ip, self.bytes_per_peer)
        if min(values) < 0 or self.tolerance < 0:
            raise ValueError("rate limits and tolerance must be >= 0")

    @property
    def advertised_packets(self) -> RateLimits:
        """Status option 4 (what we tell peers we enforce)."""
        return RateLimits(self.packets_per_ip, self.packets_per_peer, 0)

    @property
    def advertised_bytes(self) -> RateLimits:
        """Status option 6."""
        return RateLimits(self.bytes_per_ip, self.bytes_per_peer, 0)


@dataclass(frozen=True, slots=True)
class MailserverConfig:
    """How 0x7e requests are decoded and limited (§4.1, §4.7). Used only with a HistoryBackend."""

    symmetric_keys: tuple[bytes, ...] = ()
    """32-byte keys that open envelope requests, tried in order."""
    passwords: tuple[str, ...] = ()
    """Mailserver passwords; their PBKDF2 keys (§2.6) are tried after ``symmetric_keys``."""
    private_key: bytes | None = None
    """secp256k1 key that opens asymmetrically encrypted requests, tried last."""
    min_pow: float = 0.0
    """Minimum PoW of an envelope request (status-go ``MinimumPoW``); 0 = not checked."""
    request_rate_limit: float = 0.0
    """Seconds a peer must wait between requests (status-go ``MailServerRateLimit``); 0 = unlimited."""
    request_timeout: float = 60.0
    """Longest time to answer one request (backend + sending), then 0x7d ERROR (``processRequestTimeout``)."""
    max_queued_requests: int = 1
    """Requests of one peer waiting behind the one being answered; the peer's handler waits when full."""

    def __post_init__(self) -> None:
        if any(len(k) != 32 for k in self.symmetric_keys):
            raise ValueError("mailserver symmetric keys must be 32 bytes")
        if self.min_pow < 0 or self.request_rate_limit < 0 or self.request_timeout <= 0:
            raise ValueError("min_pow and request_rate_limit must be >= 0, request_timeout > 0")
        if self.max_queued_requests < 0:
            raise ValueError("max_queued_requests must be >= 0")


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Settings of one node: what it advertises, what it accepts, how it relays."""

    capabilities: tuple[str, ...] = CAPABILITIES
    """Subset of :data:`CAPABILITIES` to offer, in preference order."""
    pow_requirement: float = STATUS_MIN_POW
    """Our minimum PoW: advertised in Status and enforced on receipt (§1.5 step 4)."""
    bloom: bytes | None = None
    """Our bloom (64 bytes); None = full node, which accepts every topic."""
    topic_interest: tuple[bytes, ...] | None = None
    """Our exact topics instead of a bloom; None = bloom mode (a mailserver never sets it)."""
    light_node: bool = False
    """Advertise ourselves as a light node."""
    restrict_light_clients: bool = True
    """As a light node, refuse a peer whose Status says it is a light node too: the handshake fails and the
    peer is disconnected (0x10), as geth's and status-go's ``RestrictConnectionBetweenLightClients``
    (status-go ``RestrictLightClientsConn``, default true; §3.1, §3.4). No effect unless ``light_node``."""
    confirmations: bool = False
    """Answer every Messages packet with Message Response (12) and Batch Ack (11) (§3.6)."""
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    """Largest packet accepted (bigger → disconnect) and sent, and largest envelope ``size()`` accepted."""
    sync_allowance: int = DEFAULT_SYNC_ALLOWANCE
    """Seconds of clock skew tolerated (§1.5 steps 1-2)."""
    transmission_cycle: float = TRANSMISSION_CYCLE_S
    """Seconds between forwarding rounds (§3.8)."""
    expiration_cycle: float = EXPIRATION_CYCLE_S
    """Seconds between cache pruning rounds (§3.8)."""
    status_timeout: float = 10.0
    """Seconds to wait for the peer's Status before disconnecting (0x10); status-go waits forever."""
    sink_timeout: float = 5.0
    """Longest wait for :meth:`EnvelopeSink.accept` (see its back-pressure contract)."""
    max_cache_bytes: int = 256 * 1024 * 1024
    """Bound of the relay cache (sum of envelope sizes); the soonest-expiring envelopes are evicted first."""
    rate_limiter: RateLimiterConfig | None = None
    """Packet/byte token buckets; None = off."""
    mailserver: MailserverConfig = field(default_factory=MailserverConfig)
    """0x7e handling (effective only when a HistoryBackend is given)."""

    def __post_init__(self) -> None:
        if not self.capabilities or any(c not in CAPABILITIES for c in self.capabilities):
            raise ValueError(f"capabilities must be a non-empty subset of {CAPABILITIES}")
        if math.isnan(self.pow_requirement) or math.isinf(self.pow_requirement) or self.pow_requirement < 0:
            raise ValueError("pow_requirement must be finite and >= 0")
        if self.bloom is not None and len(self.bloom) != BLOOM_SIZE:
            raise ValueError(f"bloom must be {BLOOM_SIZE} bytes")
        if self.topic_interest is not None and (
            len(self.topic_interest) > MAX_TOPIC_INTEREST
            or any(len(t) != TOPIC_LENGTH for t in self.topic_interest)
        ):
            raise ValueError(f"topic_interest: at most {MAX_TOPIC_INTEREST} topics of 4 bytes")
        if not 0 < self.max_message_size <= MAX_MESSAGE_SIZE:
            raise ValueError(f"max_message_size must be in 1..{MAX_MESSAGE_SIZE}")
        positive = (self.transmission_cycle, self.expiration_cycle, self.status_timeout, self.sink_timeout)
        if min(positive) <= 0 or self.sync_allowance < 0 or self.max_cache_bytes <= 0:
            raise ValueError("cycles, timeouts and max_cache_bytes must be positive")

    @property
    def full_node(self) -> bool:
        """True when we accept every topic (no topic interest, full or absent bloom)."""
        return self.topic_interest is None and is_full_bloom(self.bloom)

    def status_options(self) -> StatusOptions:
        """What we advertise (status-go ``StatusOptionsFromHost``): PoW, bloom *or* topic interest, light
        node, confirmations, packet and byte rate limits."""
        limiter = self.rate_limiter
        return StatusOptions(
            pow_requirement=self.pow_requirement,
            bloom=None if self.topic_interest is not None else (self.bloom or FULL_BLOOM),
            light_node=self.light_node,
            confirmations=self.confirmations,
            packet_rate_limits=limiter.advertised_packets if limiter else RateLimits(),
            topic_interest=self.topic_interest,
            bytes_rate_limits=limiter.advertised_bytes if limiter else RateLimits(),
        )
