"""What an archive store is opened with, and the ``ARCHIVE_*`` variables that say it.

:class:`StoreConfig` is the one declaration of the store's settings: the archive service embeds it in its own
``Config`` (its README table lists them), the Spark job and the benchmarks load it on its own with
``StoreConfig.from_env(environ)``, so writers, readers and the job can never disagree on bucket width, default
shards, retention or where the data lives. :func:`archivestore.factory.create_store` turns it into an adapter.
The Cassandra connection settings (``ARCHIVE_CASSANDRA_*``) are
:class:`dbkit.cassandra.settings.CassandraSettings`, the same class the messaging store embeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from archivestore.retention import RetentionPolicy
from dbkit.cassandra.settings import CassandraSettings
from meshcore.config import FromEnv, nested, setting
from meshcore.parsers import (
    parse_choice,
    parse_duration,
    parse_float,
    parse_int,
    parse_path,
)
from wakucodec.constants import TOPIC_LENGTH

__all__ = [
    "DefaultShards",
    "StoreConfig",
    "parse_default_shards",
    "parse_topic_retention",
]

DAY_S = 86_400


class DefaultShards(NamedTuple):
    """Shards of a bucket without a shard plan entry, per bucketed table (Cassandra only)."""

    time: int
    topic: int


def _pairs(raw: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for index, part in enumerate(p.strip() for p in raw.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"item {index + 1}: must be key=value")
        pairs.append((key.strip(), value.strip()))
    return pairs


def parse_topic_retention(raw: str) -> tuple[tuple[bytes, float], ...]:
    """``0xaabbccdd=7,0x01020304=90`` → ((topic, days), …); days > 0, each topic once."""
    out: dict[bytes, float] = {}
    for key, value in _pairs(raw):
        text = key[2:] if key[:2].lower() == "0x" else key
        try:
            topic = bytes.fromhex(text)
        except ValueError:
            raise ValueError(f"{key}: a topic is {TOPIC_LENGTH} bytes of hex, e.g. 0xaabbccdd") from None
        if len(topic) != TOPIC_LENGTH:
            raise ValueError(f"{key}: a topic is {TOPIC_LENGTH} bytes of hex, e.g. 0xaabbccdd")
        days = parse_float(0)(value)
        if days <= 0:
            raise ValueError(f"{key}: retention must be > 0 days (use ARCHIVE_RETENTION_DAYS=0 for forever)")
        if topic in out:
            raise ValueError(f"{key}: topic given twice")
        out[topic] = days
    return tuple(out.items())


def parse_default_shards(raw: str) -> DefaultShards:
    """``time=4,topic=1`` (either may be left out and keeps its default) → DefaultShards."""
    values = {"time": 4, "topic": 1}
    for key, value in _pairs(raw):
        if key not in values:
            raise ValueError(f"{key}: unknown table (use time= and topic=)")
        values[key] = parse_int(1, 1024)(value)
    return DefaultShards(values["time"], values["topic"])


@dataclass(frozen=True, kw_only=True)
class StoreConfig(FromEnv):
    """Which backend, where its data lives, its tuning, and the data model (retention, buckets, shards)."""

    backend: str = setting(
        "ARCHIVE_BACKEND",
        parse_choice("sqlite", "cassandra"),
        default="sqlite",
        doc="Storage backend: sqlite (one local file, no set-up) or cassandra.",
    )
    # ------------------------------------------------------------------ SQLite
    sqlite_path: Path = setting(
        "ARCHIVE_SQLITE_PATH",
        parse_path(),
        default="var/archive.sqlite3",
        doc="SQLite: the database file (WAL; its directory is created if missing).",
    )
    sqlite_read_connections: int = setting(
        "ARCHIVE_SQLITE_READ_CONNECTIONS",
        parse_int(1, 64),
        default="4",
        doc="SQLite: concurrent read connections (WAL readers do not block the writer).",
    )
    sqlite_busy_timeout_s: float = setting(
        "ARCHIVE_SQLITE_BUSY_TIMEOUT_SECONDS",
        parse_duration(0, 600),
        default="5",
        doc="SQLite: how long a statement waits for a lock before the call fails with UNAVAILABLE.",
    )
    sqlite_cache_mib: int = setting(
        "ARCHIVE_SQLITE_CACHE_MIB",
        parse_int(2, 65536),
        default="256",
        doc="SQLite: page cache of the writer connection, MiB (keeps the hash indexes' leaves cached at "
        "millions of rows; SQLite's own default is 2).",
    )
    sqlite_group_commit_rows: int = setting(
        "ARCHIVE_SQLITE_GROUP_COMMIT_ROWS",
        parse_int(1, 100_000),
        default="4000",
        doc="SQLite: put batches waiting for the writer share one transaction up to this many envelopes "
        "(group commit: one fsync for all of them).",
    )
    # ------------------------------------------------------------------ Cassandra
    cassandra: CassandraSettings = nested(
        CassandraSettings, prefix="ARCHIVE_CASSANDRA", defaults={"keyspace": "mailmesh"}
    )
    cassandra_write_batch_bytes: int = setting(
        "ARCHIVE_CASSANDRA_WRITE_BATCH_BYTES",
        parse_int(0, 8 * 1024 * 1024),
        default="262144",  # archivestore.cassandra.writes.DEFAULT_WRITE_BATCH_BYTES
        doc="Cassandra: rows of one partition go in UNLOGGED batches up to about this many bytes (one "
        "mutation each, exempt from the batch size thresholds); 0 = one INSERT per row.",
    )
    # ------------------------------------------------------------------ data model
    retention_days: float = setting(
        "ARCHIVE_RETENTION_DAYS",
        parse_float(0, 100 * 365),
        default="30",
        doc="Days an envelope is kept after its sent time (status-go MailServerDataRetention); 0 = forever.",
    )
    topic_retention: tuple[tuple[bytes, float], ...] = setting(
        "ARCHIVE_TOPIC_RETENTION",
        parse_topic_retention,
        default="",
        doc="Per-topic retention in days overriding ARCHIVE_RETENTION_DAYS, e.g. 0xaabbccdd=7,0x01020304=90.",
    )
    bucket_seconds: int = setting(
        "ARCHIVE_BUCKET_SECONDS",
        parse_int(60, DAY_S),
        default="3600",
        doc="Width of the time buckets (partitions) in seconds; must divide a day. Fixed once data exists.",
    )
    default_shards: DefaultShards = setting(
        "ARCHIVE_DEFAULT_SHARDS",
        parse_default_shards,
        default="time=4,topic=1",
        doc="Cassandra: shards of a bucket without a shard plan entry, per table (SQLite always uses 1).",
    )
    bloom_topic_expansion: int = setting(
        "ARCHIVE_BLOOM_TOPIC_EXPANSION",
        parse_int(0, 100_000),
        default="64",
        doc="A bloom query matching at most this many known topics runs as a topics query; "
        "above it the time range is scanned and filtered.",
    )

    def __post_init__(self) -> None:
        if DAY_S % self.bucket_seconds:
            raise ValueError(f"ARCHIVE_BUCKET_SECONDS={self.bucket_seconds} must divide a day (86400)")

    @property
    def retention(self) -> RetentionPolicy:
        """Global and per-topic retention as the adapters apply it at write time."""
        return RetentionPolicy.from_days(self.retention_days, dict(self.topic_retention))
