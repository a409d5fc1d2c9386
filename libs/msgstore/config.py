"""What a Messaging API store is opened with, and the ``MSGSTORE_*`` variables that say it.

The send and subscription services share one store (leases, outbox, records), so they embed this class
with the same prefix: ``nested(StoreConfig, prefix="MSGSTORE")`` gives ``MSGSTORE_BACKEND`` and so on in
both, and they can never disagree on where the data lives or how long it is kept. ``from_env`` alone
(tools, benchmarks) uses the same prefix. The Cassandra connection settings (``MSGSTORE_CASSANDRA_*``) are
:class:`dbkit.cassandra.settings.CassandraSettings`, the same class the archive embeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from dbkit.cassandra.settings import CassandraSettings
from meshcore.config import FromEnv, load_config, nested, setting
from meshcore.parsers import parse_choice, parse_duration, parse_int, parse_path

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
    cassandra: CassandraSettings = nested(
        CassandraSettings, prefix="{prefix}_CASSANDRA", defaults={"keyspace": "mailmesh_messaging"}
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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Load with the shared ``MSGSTORE`` prefix."""
        return load_config(cls, environ, prefix=PREFIX)
