"""What a Messaging API store is opened with, and the ``MSGSTORE_*`` variables that say it.

The send and subscription services share one store (leases, outbox, records), so they embed this class
with the same prefix: ``nested(StoreConfig, prefix="MSGSTORE")`` gives ``MSGSTORE_BACKEND`` and so on in
both, and they can never disagree on where the data lives or how long it is kept. ``from_env`` alone
(tools, benchmarks) uses the same prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from dbkit.cassandra.credentials import Credentials, credentials_from
from dbkit.cassandra.names import CONSISTENCY_LEVELS, parse_keyspace
from meshcore.config import FromEnv, load_config, setting
from meshcore.parsers import (
    parse_choice,
    parse_duration,
    parse_int,
    parse_list,
    parse_optional_file,
    parse_path,
    parse_str,
)

__all__ = ["PREFIX", "StoreConfig"]

#: The env prefix both services embed the store settings with.
PREFIX = "MSGSTORE"


@dataclass(frozen=True, kw_only=True)
class StoreConfig(FromEnv):
    """Backend, location, tuning and the retention of each kind of row."""

    backend: str = setting(
        "{prefix}_BACKEND",
        parse_choice("sqlite", "cassandra"),
        default="sqlite",
        doc="Messaging store backend: sqlite (one local file) or cassandra.",
    )
    sqlite_path: Path = setting(
        "{prefix}_SQLITE_PATH",
        parse_path(),
        default="var/messaging.sqlite3",
        doc="SQLite: the database file (WAL; its directory is created if missing). Both services use it.",
    )
    sqlite_busy_timeout_s: float = setting(
        "{prefix}_SQLITE_BUSY_TIMEOUT_SECONDS",
        parse_duration(0, 600),
        default="5",
        doc="SQLite: how long a statement waits for another process's lock before failing.",
    )
    cassandra_hosts: tuple[str, ...] = setting(
        "{prefix}_CASSANDRA_HOSTS",
        parse_list(parse_str(allow_empty=False)),
        default="127.0.0.1",
        doc="Cassandra: comma-separated contact points of the local data centre.",
    )
    cassandra_port: int = setting(
        "{prefix}_CASSANDRA_PORT", parse_int(1, 65535), default="9042", doc="Cassandra: CQL native port."
    )
    cassandra_keyspace: str = setting(
        "{prefix}_CASSANDRA_KEYSPACE",
        parse_keyspace,
        default="mailmesh_messaging",
        doc="Cassandra: keyspace of the messaging tables (apart from the archive's), created at start-up.",
    )
    cassandra_consistency: str = setting(
        "{prefix}_CASSANDRA_CONSISTENCY",
        parse_choice(*CONSISTENCY_LEVELS, case_sensitive=False),
        default="LOCAL_QUORUM",
        doc="Cassandra: consistency of reads and writes (leases use LOCAL_SERIAL for their conditions).",
    )
    cassandra_local_dc: str = setting(
        "{prefix}_CASSANDRA_LOCAL_DC",
        parse_str(),
        default="",
        doc="Cassandra: data centre whose replicas coordinate; empty = the contact points' data centre.",
    )
    cassandra_replication_factor: int = setting(
        "{prefix}_CASSANDRA_REPLICATION_FACTOR",
        parse_int(1, 10),
        default="1",
        doc="Cassandra: SimpleStrategy replication factor of a keyspace the store creates.",
    )
    cassandra_request_timeout_s: float = setting(
        "{prefix}_CASSANDRA_REQUEST_TIMEOUT_SECONDS",
        parse_duration(0.1, 600),
        default="12",
        doc="Cassandra: client-side timeout of one request.",
    )
    cassandra_username: str = setting(
        "{prefix}_CASSANDRA_USERNAME",
        parse_str(),
        default="",
        doc="Cassandra: role to log in as (PasswordAuthenticator); empty = the cluster has no authenticator.",
    )
    cassandra_password: str = setting(
        "{prefix}_CASSANDRA_PASSWORD",
        parse_str(),
        default="",
        secret=True,
        doc="Cassandra: password of {prefix}_CASSANDRA_USERNAME; wins over {prefix}_CASSANDRA_PASSWORD_FILE.",
    )
    cassandra_password_file: str = setting(
        "{prefix}_CASSANDRA_PASSWORD_FILE",
        parse_optional_file(),
        default="",
        doc="Cassandra: file whose first line is the password (a mounted Secret).",
    )
    cassandra_max_in_flight: int = setting(
        "{prefix}_CASSANDRA_MAX_IN_FLIGHT",
        parse_int(1, 100_000),
        default="128",
        doc="Cassandra: requests outstanding at once.",
    )
    outbox_shards: int = setting(
        "{prefix}_OUTBOX_SHARDS",
        parse_int(1, 1024),
        default="16",
        doc="Outbox shards (units of ownership between send replicas). Fixed once requests exist.",
    )
    outbox_retention_s: float = setting(
        "{prefix}_OUTBOX_RETENTION_SECONDS",
        parse_duration(3600, 365 * 86400),
        default="604800",
        doc="Seconds a request stays in the outbox after its last change (7 days).",
    )
    change_retention_s: float = setting(
        "{prefix}_CHANGE_RETENTION_SECONDS",
        parse_duration(600, 30 * 86400),
        default="86400",
        doc="Seconds an outbox change stays replayable (WatchSendStatuses: 24 h after a request finishes).",
    )
    record_retention_s: float = setting(
        "{prefix}_RECORD_RETENTION_SECONDS",
        parse_duration(0, 3650 * 86400),
        default="604800",
        doc="Seconds a message record is kept after it was created (7 days); 0 = forever.",
    )
    record_bucket_s: float = setting(
        "{prefix}_RECORD_BUCKET_SECONDS",
        parse_duration(1, 86400),
        default="3600",
        doc="Width of the record listing partitions (by content topic / subscription) in seconds. Fixed once "
        "records exist.",
    )
    event_retention_s: float = setting(
        "{prefix}_EVENT_RETENTION_SECONDS",
        parse_duration(600, 7 * 86400),
        default="3600",
        doc="Seconds events stay replayable (at least 10 minutes, as StreamEvents promises).",
    )
    lease_margin_s: float = setting(
        "{prefix}_LEASE_SAFETY_MARGIN_SECONDS",
        parse_duration(0, 600),
        default="2",
        doc="A writer stops writing this long before its lease expires (fencing against a takeover).",
    )

    def __post_init__(self) -> None:
        if (self.cassandra_password or self.cassandra_password_file) and not self.cassandra_username:
            raise ValueError(f"a Cassandra password is set but no {PREFIX}_CASSANDRA_USERNAME")

    @property
    def cassandra_credentials(self) -> Credentials | None:
        """The login the Cassandra settings give (the password file read now); None = no authenticator."""
        return credentials_from(
            self.cassandra_username, self.cassandra_password, self.cassandra_password_file
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Load with the shared ``MSGSTORE`` prefix."""
        return load_config(cls, environ, prefix=PREFIX)
