"""Cassandra schema of the archive: keyspace, tables, versioned migrations (docs/archive.md).

Every table name and column the adapter and the Spark job rely on is defined here once. Migrations are
applied in order at ``open()`` and recorded in ``schema_migrations``; each statement is idempotent
(``IF NOT EXISTS``), so a migration interrupted half-way is simply re-run. A keyspace whose recorded version
is newer than this code raises :class:`SchemaError` instead of being touched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from archivestore.errors import SchemaError
from archivestore.retention import DAY_S, RetentionPolicy
from archivestore.types import TIME_TABLE as TIME_TABLE  # re-exported: every table name in one place
from archivestore.types import TOPIC_TABLE as TOPIC_TABLE
from dbkit.cassandra.names import KEYSPACE_RULE, is_identifier

KEYS_TABLE = "envelope_keys"
TOPICS_BY_DAY = "topics_by_day"
BUCKETS_TABLE = "archive_buckets"
PLAN_TABLE = "shard_plan"
ERASURES_TABLE = "erasures"
MIGRATIONS_TABLE = "schema_migrations"

#: Tables whose partitions are listed/deleted by ``list_buckets``/``delete_buckets`` and sharded by the plan.
SHARDED_TABLES = (TIME_TABLE, TOPIC_TABLE)
#: Every table of the archive keyspace (tests TRUNCATE these between cases).
DATA_TABLES = (TIME_TABLE, TOPIC_TABLE, KEYS_TABLE, TOPICS_BY_DAY, BUCKETS_TABLE, PLAN_TABLE, ERASURES_TABLE)

#: Tables whose rows all carry a TTL and whose only deletes are whole partitions (see ``GC_GRACE_TTL_S``).
#: A zombie row resurrected by a missed tombstone is harmless here: it still carries its TTL, reads hide
#: rows covered by a recorded erasure, and old shard generations are never read. So gc_grace need only cover
#: the hint window (``max_hint_window`` = 3 h): a replica down less than that gets the delete as a hint, and
#: fully expired TWCS SSTables are dropped 3 h after their last TTL instead of 10 days.
GC_GRACE_TTL_S = 3 * 3600

#: Cassandra's maximum TTL (20 years); longer retention is written without TTL (reads still hide it by
#: ``expires_at``; the Spark job removes it).
MAX_TTL_S = 630_720_000
#: TWCS rule of thumb (jeffjirsa/twcs README; docs/cassandra.md "Sources: data model"): fewer than ~50 windows
#: over the TTL.
MAX_TWCS_WINDOWS = 40
#: Window used when retention is unbounded (TWCS still groups by age; nothing ever expires whole).
FOREVER_WINDOW_DAYS = 7


def check_identifier(name: str) -> str:
    """``name`` if it is a plain lower-case CQL identifier (keyspace names are interpolated into CQL)."""
    if not is_identifier(name):
        raise SchemaError(f"invalid CQL identifier {name!r} (want {KEYSPACE_RULE})")
    return name


@dataclass(frozen=True)
class SchemaOptions:
    """Table options that depend on deployment settings (fixed when a table is created)."""

    bucket_seconds: int
    twcs_window_hours: int

    @classmethod
    def derive(cls, bucket_seconds: int, retention: RetentionPolicy) -> SchemaOptions:
        """TWCS windows: whole days (so every hour bucket and day partition sits in one window), widened so a
        table holds at most ``MAX_TWCS_WINDOWS`` windows over the longest retention."""
        if bucket_seconds <= 0 or (86400 % bucket_seconds and bucket_seconds % 86400):
            raise SchemaError("bucket_seconds must divide a day or be a whole number of days")
        unit_h = max(24, bucket_seconds // 3600)
        keeps = [s for s in (retention.default_s, *retention.per_topic_s.values()) if s is not None]
        if retention.default_s is None:
            days = FOREVER_WINDOW_DAYS
        else:
            days = max(1, math.ceil(max(keeps) / DAY_S / MAX_TWCS_WINDOWS))
        hours = max(unit_h, days * 24)
        return cls(bucket_seconds=bucket_seconds, twcs_window_hours=math.ceil(hours / unit_h) * unit_h)


def keyspace_cql(keyspace: str, replication: Mapping[str, str | int]) -> str:
    """``CREATE KEYSPACE IF NOT EXISTS`` with the replication map (SimpleStrategy RF 1 for a dev node)."""
    items = ", ".join(f"'{k}': '{v}'" for k, v in replication.items())
    return (
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{{items}}} AND durable_writes = true"
    )


def _envelope_table_options(opts: SchemaOptions) -> str:
    return (
        "compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'HOURS', "
        f"'compaction_window_size': '{opts.twcs_window_hours}'}} "
        f"AND gc_grace_seconds = {GC_GRACE_TTL_S} AND default_time_to_live = 0"
    )


def _v1(ks: str, opts: SchemaOptions) -> list[str]:
    twcs = _envelope_table_options(opts)
    small = f"gc_grace_seconds = {GC_GRACE_TTL_S}"
    return [
        # Partition = one time bucket (and shard); rows in the archive's (sent, hash) order.
        f"""CREATE TABLE IF NOT EXISTS {ks}.{TIME_TABLE} (
            bucket bigint, shard int, sent bigint, hash blob,
            topic blob, expiry bigint, raw blob, message_hash blob, expires_at bigint, size int,
            PRIMARY KEY ((bucket, shard), sent, hash)
        ) WITH CLUSTERING ORDER BY (sent ASC, hash ASC) AND {twcs}""",
        # Partition = one topic-day (and shard); the topics query reads only these.
        f"""CREATE TABLE IF NOT EXISTS {ks}.{TOPIC_TABLE} (
            topic blob, day bigint, shard int, sent bigint, hash blob,
            expiry bigint, raw blob, message_hash blob, expires_at bigint, size int,
            PRIMARY KEY ((topic, day, shard), sent, hash)
        ) WITH CLUSTERING ORDER BY (sent ASC, hash ASC) AND {twcs}""",
        # One partition per envelope hash and per message hash; written after the data rows (see put). A
        # message re-sent in new envelopes keeps one row per envelope, in (sent, hash) order.
        f"""CREATE TABLE IF NOT EXISTS {ks}.{KEYS_TABLE} (
            key blob, sent bigint, envelope_hash blob, kind text, topic blob, expires_at bigint,
            PRIMARY KEY (key, sent, envelope_hash)
        ) WITH {small}""",
        # Catalogue: which topics have rows on a day. keep_until (retention class) is a clustering column so
        # a later write with a shorter TTL never overwrites (and shortens) the entry of a longer-lived row.
        f"""CREATE TABLE IF NOT EXISTS {ks}.{TOPICS_BY_DAY} (
            day bigint, topic blob, keep_until bigint, PRIMARY KEY (day, topic, keep_until)
        ) WITH {small}""",
        # Catalogue: which time buckets hold rows at all (one small partition, a row per hour): time scans
        # and maintenance visit only these, and long ranges are cut down to the days that have data.
        f"""CREATE TABLE IF NOT EXISTS {ks}.{BUCKETS_TABLE} (
            scope int, bucket bigint, keep_until bigint, PRIMARY KEY (scope, bucket, keep_until)
        ) WITH {small}""",
        # Shard plan: one partition per table, every generation kept (older ones are listed until emptied).
        f"""CREATE TABLE IF NOT EXISTS {ks}.{PLAN_TABLE} (
            table_name text, bucket bigint, generation int, shards int,
            PRIMARY KEY (table_name, bucket, generation)
        ) WITH CLUSTERING ORDER BY (bucket ASC, generation DESC)""",
        # Erasures (expire / delete_buckets): rows they cover that were written before applied_at are gone
        # for readers at once; whole partitions are deleted, the rest waits for TTL (no row tombstones).
        f"""CREATE TABLE IF NOT EXISTS {ks}.{ERASURES_TABLE} (
            scope int, applied_at bigint, seq int, lo bigint, hi bigint, topic blob, except_topics set<blob>,
            modulus int, remainder int,
            PRIMARY KEY (scope, applied_at, seq)
        ) WITH CLUSTERING ORDER BY (applied_at DESC, seq ASC) AND {small}""",
    ]


@dataclass(frozen=True)
class Migration:
    """One schema version: its number, a description, and its (idempotent) statements."""

    version: int
    description: str
    statements: Callable[[str, SchemaOptions], list[str]]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "envelope tables, keys, catalogues, shard plan, erasures", _v1),
)
LATEST_VERSION = MIGRATIONS[-1].version


def migrations_table_cql(keyspace: str) -> str:
    """The table recording applied schema versions."""
    return (
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{MIGRATIONS_TABLE} "
        "(version int PRIMARY KEY, description text, applied_at timestamp)"
    )


def pending_migrations(applied: set[int]) -> list[Migration]:
    """Migrations not yet applied, in order; a recorded version newer than this code is a SchemaError."""
    if applied and max(applied) > LATEST_VERSION:
        raise SchemaError(
            f"keyspace schema version {max(applied)} is newer than this code ({LATEST_VERSION}); "
            "upgrade Mailmesh"
        )
    return [m for m in MIGRATIONS if m.version not in applied]
