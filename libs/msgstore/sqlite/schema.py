"""The SQLite messaging schema, its migrations (run by :func:`dbkit.sqlite.migrations.migrate`) and errors.

The tables mirror the Cassandra model (docs/messaging-store.md): state changes are updates, change logs
are keyed by sequence, every row that ages out carries ``expires_at``. What Cassandra needs partitions for
(days of the open-request index, record listing buckets with their counts, event buckets) SQLite does with
ordinary B-tree indexes and ``LIMIT … OFFSET``: one file has no partition to bound. Rows past
``expires_at`` are invisible to reads and removed by ``SqliteMsgStore.maintain``.
"""

from __future__ import annotations

from dbkit.errors import DbError, DbSchemaError, DbUnavailable
from dbkit.sqlite.migrations import Migration
from msgstore.errors import MsgStoreError, SchemaError, StoreUnavailable

__all__ = ["ENVELOPE_KEY", "FINAL_STATES", "MIGRATIONS", "translate"]

#: The envelope hash (hex) inside a record document, as an indexable expression (``records_envelope``).
ENVELOPE_KEY = "json_extract(CAST(body AS TEXT), '$.envelope')"

#: SendState values that end a request (SUCCEEDED, FAILED, CANCELED), spelled out for the partial index.
FINAL_STATES = "(6, 7, 8)"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "messaging: leases, payloads, outbox, changes, records, subscriptions, events",
        (
            """CREATE TABLE leases (
                name TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch INTEGER NOT NULL, expires_at REAL NOT NULL,
                ttl REAL NOT NULL
            ) WITHOUT ROWID""",
            # expires_at NULL = kept forever (record retention 0).
            """CREATE TABLE payloads (
                message_hash BLOB PRIMARY KEY, expires_at REAL, payload BLOB NOT NULL
            ) WITHOUT ROWID""",
            """CREATE TABLE outbox (
                request_id TEXT PRIMARY KEY, shard INTEGER NOT NULL, message_hash BLOB NOT NULL,
                scheduled_at REAL NOT NULL, state INTEGER NOT NULL, content_topic TEXT NOT NULL,
                expires_at REAL NOT NULL, body BLOB NOT NULL
            ) WITHOUT ROWID""",
            # The open-request index: only unfinished requests are in it, so a takeover reads just those.
            f"CREATE INDEX outbox_open ON outbox (shard, scheduled_at, request_id) "
            f"WHERE state NOT IN {FINAL_STATES}",
            "CREATE INDEX outbox_order ON outbox (scheduled_at, request_id)",
            "CREATE INDEX outbox_hash ON outbox (message_hash, scheduled_at)",
            """CREATE TABLE outbox_shards (shard INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL)""",
            """CREATE TABLE outbox_changes (
                shard INTEGER NOT NULL, seq INTEGER NOT NULL, changed_at REAL NOT NULL,
                message_hash BLOB NOT NULL, body BLOB NOT NULL, PRIMARY KEY (shard, seq)
            ) WITHOUT ROWID""",
            """CREATE TABLE records (
                message_hash BLOB PRIMARY KEY, request_id TEXT NOT NULL, content_topic TEXT NOT NULL,
                created_at REAL NOT NULL, revision INTEGER NOT NULL, expires_at REAL, body BLOB NOT NULL
            ) WITHOUT ROWID""",
            "CREATE INDEX records_request ON records (request_id) WHERE request_id != ''",
            "CREATE INDEX records_topic ON records (content_topic, created_at, message_hash)",
            """CREATE TABLE records_by_subscription (
                subscription_id TEXT NOT NULL, created_at REAL NOT NULL, message_hash BLOB NOT NULL,
                expires_at REAL, PRIMARY KEY (subscription_id, created_at, message_hash)
            ) WITHOUT ROWID""",
            """CREATE TABLE subscriptions (
                subscription_id TEXT PRIMARY KEY, created_at REAL NOT NULL, active INTEGER NOT NULL,
                expires_at REAL, body BLOB NOT NULL
            ) WITHOUT ROWID""",
            """CREATE TABLE events (
                seq INTEGER PRIMARY KEY, prev INTEGER NOT NULL, type INTEGER NOT NULL,
                emitted_at REAL NOT NULL, message_hash BLOB, body BLOB NOT NULL
            )""",
            "CREATE INDEX events_emitted ON events (emitted_at)",
            # One row per writer epoch: the greatest sequence and the last event it allocated.
            """CREATE TABLE event_heads (
                epoch INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, last_event INTEGER NOT NULL
            )""",
        ),
    ),
    Migration(
        2,
        "messaging: group members (send replicas' heartbeats and addresses)",
        (
            """CREATE TABLE members (
                grp TEXT NOT NULL, member TEXT NOT NULL, address TEXT NOT NULL, expires_at REAL NOT NULL,
                PRIMARY KEY (grp, member)
            ) WITHOUT ROWID""",
        ),
    ),
    Migration(
        3,
        "messaging: records by envelope hash, resume positions of the records writer's inputs",
        (
            # The record document's "envelope" (hex; msgstore.codec) indexed as it is: every record, old
            # ones included, is found by envelope hash without a second copy of the key.
            f"CREATE INDEX records_envelope ON records ({ENVELOPE_KEY})",
            """CREATE TABLE positions (
                name TEXT PRIMARY KEY, value BLOB NOT NULL, updated_at REAL NOT NULL
            ) WITHOUT ROWID""",
        ),
    ),
)


def translate(err: DbError, doing: str) -> MsgStoreError:
    """The msgstore error for an error of :mod:`dbkit.sqlite` (the caller raises it ``from err``)."""
    if isinstance(err, DbUnavailable):
        return StoreUnavailable(f"messaging store {doing}: {err}")
    if isinstance(err, DbSchemaError):
        return SchemaError(f"messaging store {doing}: {err}")
    return MsgStoreError(f"messaging store {doing}: {err}")
