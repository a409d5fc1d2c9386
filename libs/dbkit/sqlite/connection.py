"""One SQLite connection: the writer's and the readers' pragmas, and sqlite3 errors as :mod:`dbkit.errors`.

The writer runs in WAL mode with ``synchronous=FULL`` (https://sqlite.org/wal.html, https://sqlite.org/pragma.html
#pragma_synchronous): readers never block the writer nor each other, and a commit is on disk before it is
acknowledged. Errors are classified by their primary result code (https://sqlite.org/rescode.html), which
``sqlite3`` exposes as ``sqlite_errorcode`` since Python 3.11.
"""

from __future__ import annotations

import sqlite3

from dbkit.errors import DbCorrupt, DbError, DbSchemaError, DbUnavailable

__all__ = [
    "UNAVAILABLE_CODES",
    "WAL_AUTOCHECKPOINT_PAGES",
    "configure_reader",
    "configure_writer",
    "translate_error",
]

# Primary result codes (https://sqlite.org/rescode.html); extended codes carry them in the low byte.
_SQLITE_ERROR = 1
#: Result codes that say the database is (for now) unusable rather than that the statement is wrong.
UNAVAILABLE_CODES = frozenset(
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


def translate_error(err: sqlite3.Error, doing: str) -> DbError:
    """Map a sqlite3 exception to :mod:`dbkit.errors` (the caller raises it ``from err``).

    Busy/locked/I/O/full/can't-open → :class:`DbUnavailable` (retryable, nothing committed — the transaction
    was rolled back); corrupt/not-a-database → :class:`DbCorrupt`; a missing table or column (someone else's
    file, a half-dropped schema) → :class:`DbSchemaError`; anything else → :class:`DbError`.
    """
    code = getattr(err, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    message = f"sqlite {doing}: {err}"
    if primary in UNAVAILABLE_CODES:
        return DbUnavailable(message)
    if primary in _CORRUPT_CODES:
        return DbCorrupt(message)
    text = str(err)
    if primary == _SQLITE_ERROR and ("no such table" in text or "no such column" in text):
        return DbSchemaError(message)
    return DbError(message)


#: WAL pages before an automatic checkpoint (SQLite's default is 1000). Larger: a page that every
#: transaction dirties (the random leaves of the archive's hash indexes) is copied back to the database once
#: per checkpoint, so fewer checkpoints rewrite it fewer times; the WAL grows to about this many pages.
WAL_AUTOCHECKPOINT_PAGES = 4000


def configure_writer(
    conn: sqlite3.Connection,
    *,
    busy_timeout_ms: int,
    page_size: int | None,
    cache_mib: int = 256,
    autocheckpoint_pages: int = WAL_AUTOCHECKPOINT_PAGES,
) -> None:
    """Set up the single writer connection: page size (new files only), WAL, ``synchronous=FULL``, cache.

    ``synchronous=FULL`` in WAL mode fsyncs the WAL at every commit, so an acknowledged write survives
    power loss, not only a process kill (NORMAL would only survive the latter).
    """
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if page_size is not None and _is_empty(conn):
        conn.execute(f"PRAGMA page_size = {int(page_size)}")  # only effective before the first table
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise DbUnavailable(f"sqlite: could not switch to WAL (journal_mode is {mode!r})")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(f"PRAGMA cache_size = {-1024 * int(cache_mib)}")  # negative: KiB, not pages
    conn.execute(f"PRAGMA wal_autocheckpoint = {int(autocheckpoint_pages)}")


def configure_reader(conn: sqlite3.Connection, *, busy_timeout_ms: int) -> None:
    """Set up a read connection: same busy timeout, and ``query_only`` so a bug cannot write through it."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA query_only = 1")


def _is_empty(conn: sqlite3.Connection) -> bool:
    return int(conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]) == 0
