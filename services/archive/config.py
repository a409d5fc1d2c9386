"""Every environment variable of the archive service (the README table is ``describe_markdown(Config)``).

The store's own variables (backend, SQLite, Cassandra, retention, buckets, shards) are declared once, in
:class:`archivestore.config.StoreConfig`, and embedded here as ``store``; the Spark job reads the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from archivestore.config import StoreConfig
from meshcore.config import FromEnv, RuntimeConfig, nested, runtime_settings, setting
from meshcore.parsers import parse_duration, parse_int
from wakucodec.constants import MAX_MESSAGE_SIZE

__all__ = ["Config"]

DAY_S = 86_400
MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Config(FromEnv):
    """Archive service settings; ``describe_markdown(Config)`` renders the README table."""

    runtime: RuntimeConfig = runtime_settings(
        "ARCHIVE", service_name="archive", grpc_port=50053, metrics_port=9153
    )
    store: StoreConfig = nested(StoreConfig, prefix="")  # its names are spelt out: ARCHIVE_…
    """The store: backend, its connection and tuning, retention, buckets and shards."""
    # ------------------------------------------------------------------ request limits
    max_put_items: int = setting(
        "ARCHIVE_MAX_PUT_ITEMS",
        parse_int(1, 1000),
        default="1000",
        doc="Most items one PutEnvelopes call may carry (the API allows up to 1000).",
    )
    max_envelope_bytes: int = setting(
        "ARCHIVE_MAX_ENVELOPE_BYTES",
        parse_int(1024, MAX_MESSAGE_SIZE),
        default=str(MAX_MESSAGE_SIZE),
        doc="Largest envelope archived, as Go's size (20 + len(Data)); larger items are refused as invalid.",
    )
    query_default_max_bytes: int = setting(
        "ARCHIVE_QUERY_DEFAULT_MAX_BYTES",
        parse_int(1024, 64 * MIB),
        default=str(3 * MIB),
        doc="Byte budget (sum of RLP sizes) of a QueryEnvelopes page whose request leaves max_bytes at 0.",
    )
    # ------------------------------------------------------------------ background duties
    purge_interval_s: float = setting(
        "ARCHIVE_PURGE_INTERVAL_SECONDS",
        parse_duration(0, 7 * DAY_S),
        default="3600",
        doc="SQLite: seconds between runs of the cleaner deleting rows past retention in batches of 1000 "
        "(status-go's cleaner runs hourly); 0 = never. Cassandra expires rows by TTL instead.",
    )
    stats_interval_s: float = setting(
        "ARCHIVE_STATS_INTERVAL_SECONDS",
        parse_duration(0, DAY_S),
        default="60",
        doc="Seconds between recounts of mailserver_archived_envelopes_total (status-go: 60); 0 = never.",
    )
    health_probe_interval_s: float = setting(
        "ARCHIVE_HEALTH_PROBE_SECONDS",
        parse_duration(0, 3600),
        default="5",
        doc="Seconds between store probes; the ArchiveService health status is NOT_SERVING while the store "
        "is unreachable; 0 = no probes.",
    )
    store_retry_max_s: float = setting(
        "ARCHIVE_STORE_RETRY_MAX_SECONDS",
        parse_duration(0.1, 3600),
        default="30",
        doc="Longest back-off between attempts to open a store that was unreachable at start-up.",
    )

    def __post_init__(self) -> None:
        if self.max_envelope_bytes + 64 > self.runtime.max_message_bytes:
            raise ValueError(
                f"ARCHIVE_MAX_ENVELOPE_BYTES={self.max_envelope_bytes} does not fit in a gRPC message of "
                f"ARCHIVE_GRPC_MAX_MESSAGE_BYTES={self.runtime.max_message_bytes}"
            )
