"""Retention: how long an envelope is kept, globally and per topic (docs/archive.md "Cassandra tables").

Pure policy: adapters turn ``expires_at`` into a Cassandra TTL or a SQLite ``expires_at`` column.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DAY_S = 86_400


@dataclass(frozen=True)
class RetentionPolicy:
    """Global retention plus per-topic overrides, in seconds; ``None`` globally means keep forever."""

    default_s: int | None = 30 * DAY_S
    per_topic_s: Mapping[bytes, int] = field(default_factory=dict)

    @classmethod
    def from_days(
        cls, days: float | None, per_topic_days: Mapping[bytes, float] | None = None
    ) -> RetentionPolicy:
        """Build from days (status-go's ``MailServerDataRetention`` unit); 0 or None days = forever."""
        default = None if not days else int(days * DAY_S)
        topics = {t: int(d * DAY_S) for t, d in (per_topic_days or {}).items()}
        return cls(default_s=default, per_topic_s=topics)

    def retention_for(self, topic: bytes, override_s: int | None = None) -> int | None:
        """Seconds to keep an envelope on ``topic``; an explicit per-item override wins."""
        if override_s is not None:
            return override_s
        return self.per_topic_s.get(topic, self.default_s)

    def expires_at(self, sent: int, topic: bytes, override_s: int | None = None) -> int | None:
        """UNIX second at which the envelope leaves the archive, or None to keep it forever."""
        keep = self.retention_for(topic, override_s)
        return None if keep is None else sent + keep

    def ttl(self, sent: int, topic: bytes, now: int, override_s: int | None = None) -> int | None:
        """Seconds left from ``now`` (a Cassandra TTL); 0 or less means already expired; None = forever."""
        expires = self.expires_at(sent, topic, override_s)
        return None if expires is None else expires - now

    def cutoffs(self, now: int) -> tuple[int | None, dict[bytes, int]]:
        """``sent`` cutoffs for an expiry run: global, and per topic (envelopes with sent < cutoff go)."""
        global_cutoff = None if self.default_s is None else now - self.default_s
        return global_cutoff, {t: now - s for t, s in self.per_topic_s.items()}
