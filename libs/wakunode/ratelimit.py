"""Rate limiting (protocol-notes §4.7): packet/byte token buckets per IP and per peer, and the per-peer
request limiter.

Both take the current time as an argument (no clock inside), so tests drive them without sleeping.

- :class:`TokenBucket` — status-go uses ``tsenart/tb`` buckets: capacity = rate, refilled over time, and a
  ``Take`` that cannot be served in full *spills* the bucket (takes what is left). Here the refill is
  continuous rather than in 100 ms steps.
- :class:`PacketRateLimiter` — one packet bucket and one byte bucket per remote IP (shared by every peer from
  that IP) and per peer ID (status-go ``PeerRateLimiter.throttleIP`` / ``throttlePeer``). It only reports
  violations; the node counts them and drops the peer after the tolerance.
- :class:`RequestRateLimiter` — status-go ``mailserver/limiter.go``: a request is allowed iff the peer's
  last *allowed* request is more than ``period`` seconds ago; allowed requests record their time. The time
  is the request's receipt time (the mailserver queues requests, so it may check one later than it arrived).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import TypeVar

from wakunode.config import RateLimiterConfig

__all__ = ["PacketRateLimiter", "RequestRateLimiter", "TokenBucket"]

_K = TypeVar("_K", bytes, str)


class TokenBucket:
    """A token bucket of ``rate`` tokens per second holding at most ``capacity`` (default: ``rate``)."""

    __slots__ = ("_stamp", "capacity", "rate", "tokens")

    def __init__(self, rate: float, now: float, capacity: float | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.capacity = rate if capacity is None else capacity
        #: Tokens available as of the last call.
        self.tokens = self.capacity
        self._stamp = now

    def _refill(self, now: float) -> None:
        elapsed = now - self._stamp
        if elapsed > 0:
            self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
            self._stamp = now

    def take(self, amount: float, now: float) -> bool:
        """Take ``amount`` tokens; True if there were enough. Otherwise the bucket spills to empty (tb)."""
        self._refill(now)
        if amount <= self.tokens:
            self.tokens -= amount
            return True
        self.tokens = 0.0
        return False


@dataclass(slots=True)
class _Buckets:
    packets: TokenBucket | None
    bytes: TokenBucket | None
    users: int = 0

    def take(self, size: int, now: float) -> bool:
        """True when the packet is within both limits (both buckets are charged either way)."""
        ok = True
        if self.packets is not None:
            ok = self.packets.take(1, now) and ok
        if self.bytes is not None:
            ok = self.bytes.take(size, now) and ok
        return ok


def _release(table: dict[_K, _Buckets], key: _K) -> None:
    entry = table.get(key)
    if entry is not None:
        entry.users -= 1
        if entry.users <= 0:
            del table[key]


class PacketRateLimiter:
    """Packet and byte budgets per remote IP and per peer ID (§4.7)."""

    def __init__(self, config: RateLimiterConfig) -> None:
        self.config = config
        self._by_ip: dict[str, _Buckets] = {}
        self._by_peer: dict[bytes, _Buckets] = {}

    @staticmethod
    def _new(packets: int, size: int, now: float) -> _Buckets:
        return _Buckets(
            TokenBucket(packets, now) if packets > 0 else None, TokenBucket(size, now) if size > 0 else None
        )

    def register(self, peer: bytes, ip: str | None, now: float) -> None:
        """Start accounting for a session of ``peer`` (a peer with several sessions shares its buckets)."""
        cfg = self.config
        entry = self._by_peer.get(peer)
        if entry is None:
            entry = self._by_peer[peer] = self._new(cfg.packets_per_peer, cfg.bytes_per_peer, now)
        entry.users += 1
        if ip is not None:
            ip_entry = self._by_ip.get(ip)
            if ip_entry is None:
                ip_entry = self._by_ip[ip] = self._new(cfg.packets_per_ip, cfg.bytes_per_ip, now)
            ip_entry.users += 1

    def unregister(self, peer: bytes, ip: str | None) -> None:
        """End a session; buckets nobody uses are dropped (memory stays bounded by the peer count)."""
        _release(self._by_peer, peer)
        if ip is not None:
            _release(self._by_ip, ip)

    def check(self, peer: bytes, ip: str | None, size: int, now: float) -> tuple[bool, bool]:
        """Charge one packet of ``size`` bytes; return ``(ip_exceeded, peer_exceeded)``.

        Whitelisting is the caller's decision (it knows trusted and static peers); whitelisted IPs from the
        config are honoured here.
        """
        ip_exceeded = False
        if ip is not None and ip not in self.config.whitelisted_ips:
            ip_entry = self._by_ip.get(ip)
            ip_exceeded = ip_entry is not None and not ip_entry.take(size, now)
        peer_entry = self._by_peer.get(peer)
        peer_exceeded = peer_entry is not None and not peer_entry.take(size, now)
        return ip_exceeded, peer_exceeded

    @property
    def tracked(self) -> tuple[int, int]:
        """``(IPs, peers)`` with live buckets (for tests and memory checks)."""
        return len(self._by_ip), len(self._by_peer)


class RequestRateLimiter:
    """Minimum seconds between two *allowed* history requests of one peer (status-go ``rateLimiter``)."""

    def __init__(self, period: float) -> None:
        if period < 0:
            raise ValueError("period must be >= 0")
        self.period = period
        self._last: dict[bytes, float] = {}

    def allow(self, peer: bytes, now: float) -> bool:
        """Whether ``peer`` may make a request at ``now``; an allowed request is recorded."""
        if self.period <= 0:
            return True
        last = self._last.get(peer)
        if last is not None and not last + self.period < now:
            return False
        self._last[peer] = now
        return True

    def prune(self, now: float, keep: Container[bytes] = ()) -> None:
        """Forget peers whose last request is older than the period (status-go cleans every second), except
        those in ``keep`` (peers with requests received but not checked yet: they are checked against their
        receipt time, which may lie before ``now - period``)."""
        stale = [peer for peer, last in self._last.items() if last + self.period < now and peer not in keep]
        for peer in stale:
            del self._last[peer]

    def __len__(self) -> int:
        return len(self._last)
