"""Every environment variable of the ingest service, with its default and meaning (README table source)."""

from __future__ import annotations

from dataclasses import dataclass

from meshcore.config import FromEnv, RuntimeConfig, runtime_settings, setting
from meshcore.parsers import (
    parse_duration,
    parse_float,
    parse_grpc_target,
    parse_hex_bytes,
    parse_int,
    parse_list,
    parse_str,
)
from wakucodec.constants import (
    DEFAULT_SYNC_ALLOWANCE,
    ENVELOPE_HEADER_LENGTH,
    MAX_MESSAGE_SIZE,
    TOPIC_LENGTH,
)
from wakucodec.wakumessage import DEFAULT_PUBSUB_TOPIC

__all__ = ["ARCHIVE_ITEM_OVERHEAD", "MAX_ARCHIVE_BATCH", "Config", "parse_grpc_target"]

#: ArchiveService.PutEnvelopes accepts 1 to 1000 items per request (archive.proto).
MAX_ARCHIVE_BATCH = 1000
#: Bytes a PutItem adds to its envelope's RLP on the wire (hash, message hash, tags and lengths: ~75),
#: rounded up generously; used to check that a full archive batch fits the gRPC message limit.
ARCHIVE_ITEM_OVERHEAD = 256
#: Extra bytes a raw envelope may have beyond ``20 + len(Data)`` (RLP headers and integer encodings).
_RLP_SLACK = 64


def _parse_topic(raw: str) -> bytes:
    return parse_hex_bytes(TOPIC_LENGTH)(raw)


@dataclass(frozen=True, kw_only=True)
class Config(FromEnv):
    """Configuration of the ingest service (env prefix ``INGEST_``)."""

    runtime: RuntimeConfig = runtime_settings(
        "INGEST", service_name="ingest", grpc_port=50052, metrics_port=9152
    )
    """Listen address, metrics, logging, tracing and shutdown grace."""

    archive_addr: str = setting(
        "INGEST_ARCHIVE_ADDR",
        parse_grpc_target,
        default="127.0.0.1:50053",
        doc="mailmesh.archive.v1.ArchiveService: host:port, replicas ip:port,ip:port, or a gRPC target "
        "(dns:///archive-headless:50053); writes are balanced round-robin over its addresses.",
    )
    """Where the archive listens."""

    archive_timeout_s: float = setting(
        "INGEST_ARCHIVE_TIMEOUT_SECONDS",
        parse_duration(0.05, 300),
        default="5",
        doc="Deadline of one PutEnvelopes attempt, in seconds; past it the batch fails UNAVAILABLE.",
    )
    """Deadline of one archive write."""

    archive_retry_attempts: int = setting(
        "INGEST_ARCHIVE_RETRY_ATTEMPTS",
        parse_int(1, 5),
        default="3",
        doc="PutEnvelopes attempts on UNAVAILABLE, the first included (1-5; the write is idempotent).",
    )
    """gRPC-level retries of a failed archive write."""

    archive_reconnect_max_s: float = setting(
        "INGEST_ARCHIVE_RECONNECT_MAX_SECONDS",
        parse_duration(0.1, 120),
        default="2",
        doc="Longest back-off between reconnection attempts to a down archive, in seconds "
        "(gRPC's default of 120 s would delay recovery).",
    )
    """Bounds how long ingest takes to notice that the archive is back."""

    max_message_size: int = setting(
        "INGEST_MAX_MESSAGE_SIZE",
        parse_int(ENVELOPE_HEADER_LENGTH, MAX_MESSAGE_SIZE),
        default=str(1024 * 1024),
        doc="MaxMessageSize in bytes: envelopes with 20 + len(Data) above it are OVERSIZED (1 MiB default, "
        "10 MiB cap; protocol-notes §1.6).",
    )
    """status-go's MaxMessageSize."""

    min_pow: float = setting(
        "INGEST_MIN_POW",
        parse_float(0.0),
        default="0.000002",
        doc="Minimum proof of work; lower is LOW_POW (0.000002 = status-go node default; 0 accepts all).",
    )
    """status-go's MinimumPoW (the tolerance equals it: ingest never changes it at run time)."""

    sync_allowance_s: int = setting(
        "INGEST_SYNC_ALLOWANCE_SECONDS",
        parse_int(0, 3600),
        default=str(DEFAULT_SYNC_ALLOWANCE),
        doc="DefaultSyncAllowance in seconds: sent more than this ahead of received_at is IN_FUTURE; "
        "expired more than twice this is VERY_OLD.",
    )
    """status-go's DefaultSyncAllowance."""

    topic_allowlist: frozenset[bytes] = setting(
        "INGEST_TOPIC_ALLOWLIST",
        lambda raw: frozenset(parse_list(_parse_topic)(raw)),
        default="",
        doc="Comma-separated 4-byte topics (0x-hex) to archive; other topics are TOPIC_NOT_ALLOWED. "
        "Empty = archive every topic.",
    )
    """Subset archiving."""

    pubsub_topic: str = setting(
        "INGEST_PUBSUB_TOPIC",
        parse_str(allow_empty=False),
        default=DEFAULT_PUBSUB_TOPIC,
        doc="Pubsub topic of the 14/WAKU2 message hash computed for each envelope (v1 bridge mapping).",
    )
    """The pubsub topic the v1 -> v2 mapping publishes on (nwaku's bridge default)."""

    batch_max_envelopes: int = setting(
        "INGEST_BATCH_MAX_ENVELOPES",
        parse_int(1, MAX_ARCHIVE_BATCH),
        default="500",
        doc="Most envelopes in one archive write (1-1000).",
    )
    """Size trigger of the write batcher."""

    batch_max_bytes: int = setting(
        "INGEST_BATCH_MAX_BYTES",
        parse_int(1024),
        default=str(4 * 1024 * 1024),
        doc="Most envelope bytes in one archive write (a larger single envelope is written alone).",
    )
    """Byte trigger of the write batcher; keeps a write under the gRPC message limit."""

    batch_max_delay_ms: int = setting(
        "INGEST_BATCH_MAX_DELAY_MS",
        parse_int(0, 10_000),
        default="20",
        doc="Longest an envelope waits for its batch to fill before it is written, in milliseconds.",
    )
    """Time trigger of the write batcher."""

    max_inflight_writes: int = setting(
        "INGEST_MAX_INFLIGHT_WRITES",
        parse_int(1, 16),
        default="2",
        doc="Archive writes in flight at once.",
    )
    """Pipelining of archive writes."""

    max_pending_envelopes: int = setting(
        "INGEST_MAX_PENDING_ENVELOPES",
        parse_int(1),
        default="20000",
        doc="Envelopes queued or being written before callers wait (back-pressure).",
    )
    """Memory bound of the batcher, in envelopes."""

    max_pending_bytes: int = setting(
        "INGEST_MAX_PENDING_BYTES",
        parse_int(1024),
        default=str(64 * 1024 * 1024),
        doc="Envelope bytes queued or being written before callers wait (a larger envelope waits until "
        "nothing else is pending).",
    )
    """Memory bound of the batcher, in bytes."""

    seen_cache_size: int = setting(
        "INGEST_SEEN_CACHE_SIZE",
        parse_int(0),
        default="100000",
        doc="Envelope hashes remembered after the archive accepted them; a repeat is a duplicate without a "
        "write. 0 disables the cache.",
    )
    """Bounded LRU of acknowledged hashes."""

    stream_max_unacked_batches: int = setting(
        "INGEST_STREAM_MAX_UNACKED_BATCHES",
        parse_int(1, 1024),
        default="16",
        doc="Batches one Ingest stream may have unacknowledged before the server stops reading it.",
    )
    """Per-stream window (ingest.proto: 16)."""

    def __post_init__(self) -> None:
        if self.max_pending_envelopes < self.batch_max_envelopes:
            raise ValueError("INGEST_MAX_PENDING_ENVELOPES must be >= INGEST_BATCH_MAX_ENVELOPES")
        largest_write = max(self.batch_max_bytes, self.max_message_size + _RLP_SLACK)
        request_bytes = largest_write + self.batch_max_envelopes * ARCHIVE_ITEM_OVERHEAD
        if request_bytes > self.runtime.max_message_bytes:
            raise ValueError(
                f"an archive write can reach {request_bytes} bytes, above INGEST_GRPC_MAX_MESSAGE_BYTES="
                f"{self.runtime.max_message_bytes}; lower INGEST_BATCH_MAX_BYTES or INGEST_MAX_MESSAGE_SIZE"
            )

    @property
    def batch_max_delay_s(self) -> float:
        """The batch time trigger in seconds."""
        return self.batch_max_delay_ms / 1000
