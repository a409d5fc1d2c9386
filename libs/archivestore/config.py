"""What an archive store is opened with, and the ``ARCHIVE_*`` variables that say it.

:class:`StoreConfig` is the one declaration of the store's settings: the archive service embeds it in its own
``Config`` (its README table lists them), the Spark job and the benchmarks load it on its own with
``StoreConfig.from_env(environ)``, so writers, readers and the job can never disagree on bucket width, default
shards, retention or where the data lives. :func:`archivestore.factory.create_store` turns it into an adapter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from archivestore.retention import RetentionPolicy
from dbkit.cassandra.credentials import Credentials, credentials_from
from dbkit.cassandra.names import CONSISTENCY_LEVELS, parse_keyspace
from meshcore.config import FromEnv, setting
from meshcore.parsers import (
    parse_choice,
    parse_duration,
    parse_float,
    parse_int,
    parse_list,
    parse_optional_file,
    parse_path,
    parse_str,
)
from wakucodec.constants import TOPIC_LENGTH

__all__ = [
    "DefaultShards",
    "StoreConfig",
    "parse_dc_factors",
    "parse_default_shards",
    "parse_topic_retention",
]

DAY_S = 86_400
_DC = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


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


def parse_dc_factors(raw: str) -> tuple[tuple[str, int], ...]:
    """``dc1=3,dc2=3`` → ((dc, replication factor), …) for NetworkTopologyStrategy; empty = none."""
    out: dict[str, int] = {}
    for key, value in _pairs(raw):
        if not _DC.match(key):
            raise ValueError(f"{key}: not a data centre name")
        out[key] = parse_int(1, 10)(value)
    return tuple(out.items())


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
    cassandra_hosts: tuple[str, ...] = setting(
        "ARCHIVE_CASSANDRA_HOSTS",
        parse_list(parse_str(allow_empty=False)),
        default="127.0.0.1",
        doc="Cassandra: comma-separated contact points of the local data centre.",
    )
    cassandra_port: int = setting(
        "ARCHIVE_CASSANDRA_PORT", parse_int(1, 65535), default="9042", doc="Cassandra: CQL native port."
    )
    cassandra_keyspace: str = setting(
        "ARCHIVE_CASSANDRA_KEYSPACE",
        parse_keyspace,
        default="mailmesh",
        doc="Cassandra: keyspace, created and migrated at start-up.",
    )
    cassandra_consistency: str = setting(
        "ARCHIVE_CASSANDRA_CONSISTENCY",
        parse_choice(*CONSISTENCY_LEVELS, case_sensitive=False),
        default="LOCAL_QUORUM",
        doc="Cassandra: consistency level of every read and write.",
    )
    cassandra_local_dc: str = setting(
        "ARCHIVE_CASSANDRA_LOCAL_DC",
        parse_str(),
        default="",
        doc="Cassandra: data centre whose replicas coordinate; empty = the contact points' data centre.",
    )
    cassandra_replication_factor: int = setting(
        "ARCHIVE_CASSANDRA_REPLICATION_FACTOR",
        parse_int(1, 10),
        default="1",
        doc="Cassandra: SimpleStrategy replication factor of a keyspace the archive creates "
        "(ignored when ARCHIVE_CASSANDRA_REPLICATION_DCS is set).",
    )
    cassandra_replication_dcs: tuple[tuple[str, int], ...] = setting(
        "ARCHIVE_CASSANDRA_REPLICATION_DCS",
        parse_dc_factors,
        default="",
        doc="Cassandra: NetworkTopologyStrategy factors of a keyspace the archive creates, e.g. dc1=3,dc2=3; "
        "empty = SimpleStrategy. An existing keyspace is never altered.",
    )
    cassandra_request_timeout_s: float = setting(
        "ARCHIVE_CASSANDRA_REQUEST_TIMEOUT_SECONDS",
        parse_duration(0.1, 600),
        default="12",
        doc="Cassandra: client-side timeout of one request (keep above the server's 5 s write timeout).",
    )
    cassandra_connect_timeout_s: float = setting(
        "ARCHIVE_CASSANDRA_CONNECT_TIMEOUT_SECONDS",
        parse_duration(0.1, 600),
        default="5",
        doc="Cassandra: timeout of one connection attempt.",
    )
    cassandra_username: str = setting(
        "ARCHIVE_CASSANDRA_USERNAME",
        parse_str(),
        default="",
        doc="Cassandra: role to log in as (PasswordAuthenticator); empty = the cluster has no authenticator.",
    )
    cassandra_password: str = setting(
        "ARCHIVE_CASSANDRA_PASSWORD",
        parse_str(),
        default="",
        secret=True,
        doc="Cassandra: password of ARCHIVE_CASSANDRA_USERNAME; wins over ARCHIVE_CASSANDRA_PASSWORD_FILE.",
    )
    cassandra_password_file: str = setting(
        "ARCHIVE_CASSANDRA_PASSWORD_FILE",
        parse_optional_file(),
        default="",
        doc="Cassandra: file whose first line is the password (a mounted Secret).",
    )
    cassandra_max_in_flight: int = setting(
        "ARCHIVE_CASSANDRA_MAX_IN_FLIGHT",
        parse_int(1, 100_000),
        default="128",
        doc="Cassandra: requests outstanding at once (backpressure on the driver).",
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
        if (self.cassandra_password or self.cassandra_password_file) and not self.cassandra_username:
            raise ValueError("a Cassandra password is set but no ARCHIVE_CASSANDRA_USERNAME")

    @property
    def retention(self) -> RetentionPolicy:
        """Global and per-topic retention as the adapters apply it at write time."""
        return RetentionPolicy.from_days(self.retention_days, dict(self.topic_retention))

    @property
    def replication(self) -> dict[str, str | int]:
        """Keyspace replication map for a keyspace the archive creates."""
        if self.cassandra_replication_dcs:
            return {"class": "NetworkTopologyStrategy", **dict(self.cassandra_replication_dcs)}
        return {"class": "SimpleStrategy", "replication_factor": self.cassandra_replication_factor}

    @property
    def cassandra_credentials(self) -> Credentials | None:
        """The login the Cassandra settings give (the password file read now); None = no authenticator."""
        return credentials_from(
            self.cassandra_username, self.cassandra_password, self.cassandra_password_file
        )
