"""Every environment variable of the history-query service (``HISTORY_`` prefix), with defaults and docs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from meshcore import FromEnv, RuntimeConfig, runtime_settings, setting
from meshcore.parsers import (
    Parser,
    parse_bool,
    parse_choice,
    parse_duration,
    parse_grpc_target,
    parse_hex_bytes,
    parse_int,
    parse_list,
    parse_path,
)
from wakucodec.constants import MAX_QUERY_LIMIT

__all__ = ["MAX_BATCH_BYTES_CAP", "MIN_SECRET_BYTES", "Config", "parse_secret", "parse_target"]

#: Cursor secrets shorter than this are refused: the HMAC key must carry at least 128 bits.
MIN_SECRET_BYTES = 16
#: HistoryQueryRequest.max_batch_bytes may not exceed 64 MiB (history.proto).
MAX_BATCH_BYTES_CAP = 64 * 1024 * 1024


def parse_secret(raw: str) -> bytes:
    """Parse one hex cursor secret (``0x`` optional) of at least :data:`MIN_SECRET_BYTES` bytes."""
    value = parse_hex_bytes()(raw)
    if len(value) < MIN_SECRET_BYTES:
        raise ValueError(f"a cursor secret must be at least {MIN_SECRET_BYTES} bytes, got {len(value)}")
    return value


def parse_target(raw: str) -> str:
    """A service's gRPC address: ``host:port``, its replicas ``ip:port,ip:port`` (balanced round-robin) or a
    URI such as ``dns:///svc:50053`` (:func:`meshcore.parsers.parse_grpc_target`)."""
    return parse_grpc_target(raw)


_parse_secrets: Parser[tuple[bytes, ...]] = parse_list(parse_secret)


@dataclass(frozen=True, kw_only=True)
class Config(FromEnv):
    """history-query settings; the README table is ``describe_markdown(Config)``."""

    runtime: RuntimeConfig = runtime_settings(
        "HISTORY", service_name="history", grpc_port=50054, metrics_port=9154
    )
    archive_addr: str = setting(
        "HISTORY_ARCHIVE_ADDR",
        parse_target,
        default="127.0.0.1:50053",
        doc="Archive service (mailmesh.archive.v1.ArchiveService): host:port, replicas ip:port,ip:port, or a "
        "gRPC target such as dns:///archive-headless:50053 (every address it resolves to).",
    )
    archive_timeout_s: float = setting(
        "HISTORY_ARCHIVE_TIMEOUT_SECONDS",
        parse_duration(0.01, 600),
        default="5",
        doc="Deadline of one archive call, seconds (lowered to what is left of the caller's deadline).",
    )
    archive_retry_attempts: int = setting(
        "HISTORY_ARCHIVE_RETRY_ATTEMPTS",
        parse_int(1, 5),
        default="3",
        doc="Attempts per archive read (QueryEnvelopes, ContainsEnvelopes) if UNAVAILABLE, first included.",
    )
    archive_load_balancing: str = setting(
        "HISTORY_ARCHIVE_LOAD_BALANCING",
        parse_choice("pick_first", "round_robin"),
        default="round_robin",
        doc="gRPC load balancing over the archive's addresses: round_robin spreads reads over every replica; "
        "pick_first sends all to the first that connects.",
    )
    archive_page: int = setting(
        "HISTORY_ARCHIVE_PAGE",
        parse_int(1, MAX_QUERY_LIMIT),
        default="1000",
        doc="Envelopes in a query's first archive read; the rest of the limit comes in one further read. "
        "Smaller: the first batch leaves sooner; 1000: one read per query, about 15 % less CPU.",
    )
    cursor_secrets: tuple[bytes, ...] = setting(
        "HISTORY_CURSOR_SECRETS",
        _parse_secrets,
        default="",
        secret=True,
        doc="Comma-separated hex HMAC secrets for cursors (>= 16 bytes each): the first signs, all verify "
        "(rotation: put the new one first, keep the old one second). Every replica must share them. "
        "When set, HISTORY_CURSOR_SECRET_FILE is not read.",
    )
    cursor_secret_file: Path = setting(
        "HISTORY_CURSOR_SECRET_FILE",
        parse_path(),
        default="var/history/cursor.secret",
        doc="File with one hex cursor secret per line (first signs, all verify; blank lines and # comments "
        "ignored); used when HISTORY_CURSOR_SECRETS is empty.",
    )
    cursor_secret_autocreate: bool = setting(
        "HISTORY_CURSOR_SECRET_AUTOCREATE",
        parse_bool(),
        default="true",
        doc="Create HISTORY_CURSOR_SECRET_FILE with a random 32-byte secret (mode 0600) if it is missing; "
        "for local runs: replicas must share one secret, so set false in clusters.",
    )
    default_limit: int = setting(
        "HISTORY_DEFAULT_LIMIT",
        parse_int(1, MAX_QUERY_LIMIT),
        default=str(MAX_QUERY_LIMIT),
        doc="Envelopes per query when the request's limit is 0 (status-go: 1000).",
    )
    max_limit: int = setting(
        "HISTORY_MAX_LIMIT",
        parse_int(1, MAX_QUERY_LIMIT),
        default=str(MAX_QUERY_LIMIT),
        doc="Larger limits are capped to this (not refused), at most 1000.",
    )
    max_batch_bytes: int = setting(
        "HISTORY_MAX_BATCH_BYTES",
        parse_int(1024, MAX_BATCH_BYTES_CAP),
        default=str(1024 * 1024),
        doc="Batch byte budget (the RLP list of one 0x7f) when the request's max_batch_bytes is 0 "
        "(status-go DefaultMaxMessageSize, 1 MiB).",
    )
    served_ring_hashes: int = setting(
        "HISTORY_SERVED_RING_HASHES",
        parse_int(1000, 10_000_000),
        default="100000",
        doc="Envelope hashes of recent Query results kept for WatchServed watchers to resume from (32 bytes "
        "each; the subscription service marks those records stored).",
    )
    default_direction: str = setting(
        "HISTORY_DEFAULT_DIRECTION",
        parse_choice("forward", "backward"),
        default="forward",
        doc="Order if the request leaves direction unspecified; forward = oldest first (status-go LevelDB).",
    )

    def __post_init__(self) -> None:
        if self.default_limit > self.max_limit:
            raise ValueError("HISTORY_DEFAULT_LIMIT must not exceed HISTORY_MAX_LIMIT")
