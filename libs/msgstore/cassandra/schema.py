"""Cassandra schema of the messaging store: every table, its key and why (docs/messaging-store.md).

Designed for Cassandra's write path: no queue of deletes (a request or subscription changing state is an
update of its row, history leaves by TTL), every partition bounded (outbox index by (shard, day), change
logs by (shard, sequence bucket), record listings by (key, time bucket), events by sequence bucket), no
counter columns (the single writer keeps row counts as regular columns), and lightweight transactions only
for leases. Migrations are idempotent (``IF NOT EXISTS``) and recorded in ``schema_migrations``.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgstore.errors import SchemaError

__all__ = ["DATA_TABLES", "LATEST_VERSION", "MIGRATIONS", "keyspace_cql", "pending"]

_TABLES = {
    "leases": "(name text PRIMARY KEY, owner text, epoch bigint, expires_at double, ttl double)",
    # Immutable per message hash, shared by outbox entries and records; written before the rows naming it.
    "payloads": "(message_hash blob PRIMARY KEY, payload blob)",
    "outbox": "(request_id text PRIMARY KEY, shard int, message_hash blob, scheduled_at double, body blob)",
    # Every request of a (shard, scheduling day), its state updated in place; open = not final.
    "outbox_open": "(shard int, day int, scheduled_at double, request_id text, open boolean, state int, "
    "content_topic text, PRIMARY KEY ((shard, day), scheduled_at, request_id))",
    "outbox_by_hash": "(message_hash blob, scheduled_at double, request_id text, "
    "PRIMARY KEY (message_hash, scheduled_at, request_id)) "
    "WITH CLUSTERING ORDER BY (scheduled_at DESC, request_id DESC)",
    # One row per shard: the last change sequence and the oldest day that may hold an open request.
    "outbox_shards": "(shard int PRIMARY KEY, last_seq bigint, watermark_day int)",
    "outbox_changes": "(shard int, bucket bigint, seq bigint, changed_at double, message_hash blob, "
    "body blob, PRIMARY KEY ((shard, bucket), seq))",
    "records": "(message_hash blob PRIMARY KEY, created_at double, revision bigint, body blob)",
    "records_by_request": "(request_id text PRIMARY KEY, message_hash blob)",
    "records_by_topic": "(content_topic text, bucket bigint, created_at double, message_hash blob, "
    "PRIMARY KEY ((content_topic, bucket), created_at, message_hash))",
    "records_by_subscription": "(subscription_id text, bucket bigint, created_at double, message_hash blob, "
    "PRIMARY KEY ((subscription_id, bucket), created_at, message_hash))",
    # Rows per listing bucket (kind 't' = content topic, 's' = subscription), kept by the single writer.
    "record_buckets": "(kind text, key text, bucket bigint, rows int, PRIMARY KEY ((kind, key), bucket))",
    # One partition: subscriptions are few, and ended ones leave by TTL.
    "subscriptions": "(part int, subscription_id text, created_at double, active boolean, body blob, "
    "PRIMARY KEY (part, subscription_id))",
    "events": "(bucket bigint, seq bigint, prev bigint, type int, emitted_at double, message_hash blob, "
    "body blob, PRIMARY KEY (bucket, seq))",
    # The event buckets in use (sequences jump at each writer epoch, so buckets are sparse).
    "event_buckets": "(part int, bucket bigint, PRIMARY KEY (part, bucket))",
    "event_heads": "(part int, epoch bigint, last_seq bigint, last_event bigint, PRIMARY KEY (part, epoch)) "
    "WITH CLUSTERING ORDER BY (epoch DESC)",
}

# Version 2. One partition per group (its few live members); rows carry a TTL, a heartbeat rewrites them.
_TABLES_2 = {
    "members": "(grp text, member text, address text, expires_at double, PRIMARY KEY (grp, member))",
}

#: Added by migration 3.
_TABLES_3 = {
    # Records by Waku v1 envelope hash (several records may carry one), TTL'd with the record.
    "records_by_envelope": "(envelope_hash blob, message_hash blob, "
    "PRIMARY KEY (envelope_hash, message_hash))",
    # Where the records writer is in each input it follows (edge feeds, send changes, served history).
    "positions": "(name text PRIMARY KEY, value blob, updated_at double)",
}
#: Columns added by migration 3: each log entry carries its predecessor's time and each log head its last
#: entry's, so a reader tells an entry still being written from one past retention (msgstore.replay).
_COLUMNS_3 = {
    "events": ("prev_at double",),
    "event_heads": ("last_at double",),
    "outbox_changes": ("prev_at double",),
    "outbox_shards": ("last_at double",),
}

#: Tables holding data (tests TRUNCATE these between cases).
DATA_TABLES = (*_TABLES, *_TABLES_2, *_TABLES_3)

#: (version, description, statements with ``{ks}`` for the keyspace). ``ADD IF NOT EXISTS`` (Cassandra 5.0)
#: keeps a migration that stopped half-way repeatable.
MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        1,
        "messaging: leases, payloads, outbox, changes, records, listings, subscriptions, events",
        tuple(f"CREATE TABLE IF NOT EXISTS {{ks}}.{name} {cols}" for name, cols in _TABLES.items()),
    ),
    (
        2,
        "messaging: group members (send replicas' heartbeats and addresses)",
        tuple(f"CREATE TABLE IF NOT EXISTS {{ks}}.{name} {cols}" for name, cols in _TABLES_2.items()),
    ),
    (
        3,
        "messaging: records by envelope, input positions, predecessor times of log entries",
        tuple(f"CREATE TABLE IF NOT EXISTS {{ks}}.{name} {cols}" for name, cols in _TABLES_3.items())
        + tuple(
            f"ALTER TABLE {{ks}}.{table} ADD IF NOT EXISTS {column}"
            for table, columns in _COLUMNS_3.items()
            for column in columns
        ),
    ),
)
LATEST_VERSION = MIGRATIONS[-1][0]


def keyspace_cql(keyspace: str, replication: Mapping[str, str | int]) -> str:
    """``CREATE KEYSPACE IF NOT EXISTS`` with the replication map; an existing keyspace is never altered."""
    items = ", ".join(f"'{k}': '{v}'" for k, v in replication.items())
    return f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{{items}}}"


def pending(applied: set[int]) -> list[tuple[int, str, tuple[str, ...]]]:
    """Migrations not applied yet; a recorded version newer than this code is a SchemaError."""
    if applied and max(applied) > LATEST_VERSION:
        raise SchemaError(
            f"keyspace schema version {max(applied)} is newer than this code ({LATEST_VERSION})"
        )
    return [m for m in MIGRATIONS if m[0] not in applied]
