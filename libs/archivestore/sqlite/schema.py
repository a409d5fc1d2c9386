"""The SQLite archive's schema and its versioned migrations.

Layout (docs/archive.md "SQLite"): ``envelopes`` is a ``WITHOUT ROWID`` table clustered on the archive order
``(sent, hash)``, so a time range is one contiguous B-tree range, like status-go's LevelDB key
(docs/protocol-notes.md §4.3). ``raw`` is the last column on purpose: SQLite reads a row's columns in
order and only follows overflow pages when a column stored there is asked for, so filters on
``topic``/``expires_at`` never touch the (often overflowing) envelope bytes.

Migrations run at ``open()`` through :func:`dbkit.sqlite.migrations.migrate` (under ``BEGIN IMMEDIATE``:
two processes opening a fresh file cannot both migrate); a file whose ``schema_migrations`` records a version
newer than :data:`SCHEMA_VERSION` is refused. Connection pragmas and sqlite3 error translation are dbkit's
(:mod:`dbkit.sqlite.connection`); :func:`migrate` maps dbkit's errors onto the archive's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from archivestore.errors import from_db
from dbkit.errors import DbError
from dbkit.sqlite import migrations as dbkit_migrations
from dbkit.sqlite.migrations import Migration

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "envelopes, topics catalogue, shard plan",
        (
            # expires_at NULL = kept forever (RetentionPolicy.default_s None). Rows with expires_at <= now are
            # invisible to every read and removed by purge_expired() in batches (status-go cleaner: 1000).
            """CREATE TABLE envelopes (
                sent         INTEGER NOT NULL,
                hash         BLOB    NOT NULL,
                topic        BLOB    NOT NULL,
                expiry       INTEGER NOT NULL,
                expires_at   INTEGER,
                message_hash BLOB,
                raw          BLOB    NOT NULL,
                PRIMARY KEY (sent, hash)
            ) WITHOUT ROWID""",
            "CREATE UNIQUE INDEX envelopes_hash ON envelopes (hash)",
            # (topic, sent, hash): the per-topic ranges the topics query merges in (sent, hash) order.
            "CREATE INDEX envelopes_topic ON envelopes (topic, sent, hash)",
            "CREATE INDEX envelopes_message_hash ON envelopes (message_hash) WHERE message_hash IS NOT NULL",
            "CREATE INDEX envelopes_expires_at ON envelopes (expires_at) WHERE expires_at IS NOT NULL",
            # Bloom → topics expansion (Cassandra's topics_by_day counterpart): a superset of the topics
            # with rows in [first_sent, last_sent]; deletions shrink it afterwards (prune_catalogue).
            """CREATE TABLE topics (
                topic      BLOB    PRIMARY KEY,
                first_sent INTEGER NOT NULL,
                last_sent  INTEGER NOT NULL
            ) WITHOUT ROWID""",
            # Kept for protocol parity with Cassandra: SQLite buckets are virtual (sent // width, shard 0).
            """CREATE TABLE shard_plan (
                table_name TEXT    NOT NULL,
                bucket     INTEGER NOT NULL,
                generation INTEGER NOT NULL,
                shards     INTEGER NOT NULL,
                PRIMARY KEY (table_name, bucket)
            ) WITHOUT ROWID""",
        ),
    ),
)

#: The newest schema this code knows; a database recording a newer one is refused with SchemaError.
SCHEMA_VERSION = MIGRATIONS[-1].version

_REQUIRED_TABLES = frozenset({"envelopes", "topics", "shard_plan", "schema_migrations"})


def migrate(conn: sqlite3.Connection, *, now: int, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the schema to the newest version in ``migrations``; returns the version found before.

    Raises :class:`~archivestore.errors.SchemaError` for a database from a newer Mailmesh, a failed migration
    step, or a file that records a version but lacks the archive's tables (checked for :data:`MIGRATIONS`
    only: other lists are tests' own). A busy or failing disk stays ``sqlite3.Error`` for the bridge.
    """
    required = _REQUIRED_TABLES if migrations is MIGRATIONS else ()
    try:
        return dbkit_migrations.migrate(conn, migrations, now=now, required_tables=required)
    except DbError as err:
        raise from_db(err) from err
