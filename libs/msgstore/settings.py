"""The data-model settings every backend applies the same way (from :class:`~msgstore.config.StoreConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

from msgstore.errors import LeaseLost
from msgstore.types import Lease

__all__ = ["StoreSettings", "check_lease"]


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Shards, retention windows (seconds; record_retention 0 = forever), bucket width, lease margin."""

    shards: int = 16
    outbox_retention: float = 7 * 86400.0
    change_retention: float = 86400.0
    record_retention: float = 7 * 86400.0
    record_bucket: float = 3600.0
    event_retention: float = 3600.0
    lease_margin: float = 2.0

    def record_expiry(self, created_at: float) -> float | None:
        """When a record created at ``created_at`` (and its index rows) expire; None = never."""
        return None if self.record_retention <= 0 else created_at + self.record_retention

    def record_bucket_of(self, created_at: float) -> int:
        """The listing partition of a record created at ``created_at``."""
        return int(created_at // self.record_bucket)


def check_lease(lease: Lease, margin: float, now: float) -> None:
    """Refuse to write under a lease that expires within ``margin`` seconds of ``now``.

    The holder's clock and a taker's may differ; stopping ``margin`` before expiry leaves that much skew
    (plus the write's own latency) before another replica can acquire the lease and write too.
    """
    if now >= lease.expires_at - margin:
        raise LeaseLost(lease.name, lease.epoch, f"expires at {lease.expires_at:.3f}, now {now:.3f}")
