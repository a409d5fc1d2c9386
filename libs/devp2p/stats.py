"""Server counters and the per-IP inbound throttle.

:class:`ServerStats` is plain counters (no Prometheus import here): the edge-peer service reads it and exports
``devp2p_*`` metrics, e.g. ``rejected`` as ``devp2p_rejected_connections_total{reason=…}``. Every way a
connection can be refused or end is counted under a stable label:

- ``rejected`` — connections that never became a session: ``throttled``, ``pending_limit``,
  ``shutting_down``, ``plain_handshake``, ``handshake_failed``, ``handshake_timeout``, ``connection_lost``,
  ``dial_failed`` (TCP connect failed), and the disconnect reason names of refusals during set-up
  (``too_many_peers``, ``already_connected``, ``self``, ``useless_peer``, ``invalid_identity``,
  ``unexpected_identity``, ``protocol_error``, …);
- ``disconnects_sent`` / ``disconnects_received`` — every Disconnect by reason name (set-up and sessions);
- ``errors`` — the error class that ended a connection (``BadMAC``, ``MessageTooLarge``, ``ReadTimeout``, …).
"""

from __future__ import annotations

import ipaddress
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["InboundThrottle", "ServerStats"]


@dataclass
class ServerStats:
    """Counters of one :class:`~devp2p.server.Server` since it was created."""

    inbound_accepted: int = 0
    """TCP connections accepted by the listener."""
    dials: int = 0
    """Outbound dial attempts."""
    sessions: int = 0
    """Sessions established (Hello exchanged, peer added), inbound and outbound."""
    rejected: Counter[str] = field(default_factory=Counter)
    """Connections that did not become a session, by label (see the module docstring)."""
    disconnects_sent: Counter[str] = field(default_factory=Counter)
    """Disconnect messages we sent, by reason name."""
    disconnects_received: Counter[str] = field(default_factory=Counter)
    """Disconnect messages we received, by reason name."""
    errors: Counter[str] = field(default_factory=Counter)
    """Errors that ended a connection or session, by exception class name."""

    def snapshot(self) -> dict[str, object]:
        """A plain-dict copy, for logs and exporters."""
        return {
            "inbound_accepted": self.inbound_accepted,
            "dials": self.dials,
            "sessions": self.sessions,
            "rejected": dict(self.rejected),
            "disconnects_sent": dict(self.disconnects_sent),
            "disconnects_received": dict(self.disconnects_received),
            "errors": dict(self.errors),
        }


def is_lan(host: str) -> bool:
    """Whether ``host`` is a loopback, private or link-local address (geth ``netutil.IsLAN``)."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_private or ip.is_link_local


class InboundThrottle:
    """Allows one inbound attempt per source IP per ``interval`` seconds (geth ``inboundHistory``).

    Entries expire in insertion order (every entry lives exactly ``interval``), so pruning is O(expired).
    """

    def __init__(
        self, interval: float, *, exempt_lan: bool = True, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self.exempt_lan = exempt_lan
        self._clock = clock
        self._until: OrderedDict[str, float] = OrderedDict()

    def allow(self, host: str) -> bool:
        """Record an attempt from ``host``; False if it made one within the interval."""
        if self.interval <= 0 or (self.exempt_lan and is_lan(host)):
            return True
        now = self._clock()
        while self._until:
            oldest, until = next(iter(self._until.items()))
            if until > now:
                break
            del self._until[oldest]
        if host in self._until:
            return False
        self._until[host] = now + self.interval
        return True

    def __len__(self) -> int:
        return len(self._until)
