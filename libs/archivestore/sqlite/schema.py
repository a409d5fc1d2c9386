"""The SQLite archive's schema, its versioned migrations, connection set-up and error translation.

Layout (docs/archive.md "SQLite"): ``envelopes`` is a ``WITHOUT ROWID`` table clustered on the archive order
``(sent, hash)``, so a time range is one contiguous B-tree range, like status-go's LevelDB key
(docs/protocol-notes.md §4.3). ``raw`` is the last column on purpose: SQLite reads a row's columns in
order and only follows overflow pages when a column stored there is asked for, so filters on
``topic``/``expires_at`` never touch the (often overflowing) envelope bytes.

Migrations run at ``open()`` under ``BEGIN IMMEDIATE`` (two processes opening a fresh file cannot both
migrate); a file whose ``schema_migrations`` records a version newer than :data:`SCHEMA_VERSION` is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from archivestore.errors import SchemaError, StoreCorrupt, StoreError, StoreUnavailable

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "configure_reader",
    "configure_writer",
    "migrate",
    "translate_error",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: applied in one transaction, recorded in ``schema_migrations``."""

    version: int
    description: str
    statements: tuple[str, ...]


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

# Primary result codes (https://sqlite.org/rescode.html); extended codes carry them in the low byte.
_SQLITE_ERROR = 1
_UNAVAILABLE_CODES = frozenset(
    {
        5,  # SQLITE_BUSY      another connection holds the lock past busy_timeout
        6,  # SQLITE_LOCKED    table locked within the shared cache
        7,  # SQLITE_NOMEM
        8,  # SQLITE_READONLY  read-only file system or file
        9,  # SQLITE_INTERRUPT
        10,  # SQLITE_IOERR    disk I/O error (incl. fsync failures)
        13,  # SQLITE_FULL     disk full
        14,  # SQLITE_CANTOPEN
        15,  # SQLITE_PROTOCOL WAL lock protocol error
    }
)
_CORRUPT_CODES = frozenset(
    {
        11,  # SQLITE_CORRUPT  database disk image is malformed
        24,  # SQLITE_FORMAT
        26,  # SQLITE_NOTADB   file is not a database
    }
)


def translate_error(err: sqlite3.Error, doing: str) -> StoreError:
    """Map a sqlite3 exception to the archivestore hierarchy (the caller raises it ``from err``).

    Busy/locked/I/O/full/can't-open → :class:`StoreUnavailable` (retryable, nothing acknowledged — the
    transaction was rolled back); corrupt/not-a-database → :class:`StoreCorrupt`; a missing table or column
    (someone else's file, a half-dropped schema) → :class:`SchemaError`; anything else → :class:`StoreError`.
    """
    code = getattr(err, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    message = f"sqlite {doing}: {err}"
    if primary in _UNAVAILABLE_CODES:
        return StoreUnavailable(message)
    if primary in _CORRUPT_CODES:
        return StoreCorrupt(message)
    text = str(err)
    if primary == _SQLITE_ERROR and ("no such table" in text or "no such column" in text):
        return SchemaError(message)
    return StoreError(message)


#: WAL pages before an automatic checkpoint (SQLite's default is 1000). Larger: a page that every
#: transaction dirties (the random leaves of the hash indexes) is copied back to the database once per
#: checkpoint, so fewer checkpoints rewrite it fewer times; the WAL grows to about this many pages.
WAL_AUTOCHECKPOINT_PAGES = 4000


def configure_writer(
    conn: sqlite3.Connection, *, busy_timeout_ms: int, page_size: int | None, cache_mib: int = 256
) -> None:
    """Set up the single writer connection: page size (new files only), WAL, ``synchronous=FULL``, cache.

    ``synchronous=FULL`` in WAL mode fsyncs the WAL at every commit, so an acknowledged ``put`` survives
    power loss, not only a process kill (NORMAL would only survive the latter).
    """
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if page_size is not None and _is_empty(conn):
        conn.execute(f"PRAGMA page_size = {int(page_size)}")  # only effective before the first table
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreUnavailable(f"sqlite: could not switch to WAL (journal_mode is {mode!r})")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(f"PRAGMA cache_size = {-1024 * int(cache_mib)}")  # negative: KiB, not pages
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")


def configure_reader(conn: sqlite3.Connection, *, busy_timeout_ms: int) -> None:
    """Set up a read connection: same busy timeout, and ``query_only`` so a bug cannot write through it."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA query_only = 1")


def _is_empty(conn: sqlite3.Connection) -> bool:
    return int(conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]) == 0


def migrate(conn: sqlite3.Connection, *, now: int, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the schema to the newest version in ``migrations``; returns the version found before.

    Raises :class:`SchemaError` for a database from a newer Mailmesh, a failed migration step, or a file
    that records a version but lacks its tables.
    """
    newest = migrations[-1].version if migrations else 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        found = int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])
        if found > newest:
            raise SchemaError(
                f"database schema version {found} is newer than this code's {newest}; upgrade Mailmesh"
            )
        for step in migrations:
            if step.version <= found:
                continue
            try:
                for statement in step.statements:
                    conn.execute(statement)
            except sqlite3.OperationalError as err:
                if (getattr(err, "sqlite_errorcode", 0) or 0) & 0xFF in _UNAVAILABLE_CODES:
                    raise
                raise SchemaError(f"migration {step.version} ({step.description}) failed: {err}") from err
            conn.execute(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
                (step.version, step.description, now),
            )
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        missing = _REQUIRED_TABLES - tables
        if missing and migrations is MIGRATIONS:
            raise SchemaError(
                f"schema version {max(found, newest)} recorded but tables missing: {sorted(missing)}"
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found
