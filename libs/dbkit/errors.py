"""Errors raised by the shared database plumbing.

::

    DbError
    ├── DbUnavailable   unreachable, busy past its timeout or timed out (retryable; nothing was committed)
    ├── DbCorrupt       the file or data failed an integrity check of the database itself
    └── DbSchemaError   a table or column is missing, the schema is newer than the code, or a migration failed

Each store maps these onto its own hierarchy at its boundary (``archivestore.errors.from_db``,
``msgstore``'s backends), always ``raise X from err`` with the message carried over: callers of a store
never see a ``DbError``.
"""

from __future__ import annotations

__all__ = ["DbCorrupt", "DbError", "DbSchemaError", "DbUnavailable"]


class DbError(Exception):
    """Base class of the errors of :mod:`dbkit`; anything not more specific (e.g. a constraint violation)."""


class DbUnavailable(DbError):
    """The database is unreachable, busy past its timeout, out of space or closed: retry later.

    Nothing was committed: the transaction was rolled back (SQLite) or the write not acknowledged (Cassandra).
    """


class DbCorrupt(DbError):
    """The database file is malformed or not a database (SQLite ``SQLITE_CORRUPT``/``NOTADB``)."""


class DbSchemaError(DbError):
    """A table or column is missing, the recorded schema is newer than the code, or a migration failed."""
