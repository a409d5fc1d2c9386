"""Errors raised by archive storage adapters.

::

    StoreError
    ├── StoreUnavailable   the backend cannot be reached or timed out (retryable; nothing was acknowledged)
    ├── StoreCorrupt       stored data failed an integrity check
    └── SchemaError        the schema is missing, newer than this code, or a migration failed

The backends raise these; what the shared database plumbing (:mod:`dbkit`) raises is mapped onto them by
:func:`from_db` where a backend calls it.
"""

from __future__ import annotations

from dbkit.errors import DbCorrupt, DbError, DbSchemaError, DbUnavailable

__all__ = ["SchemaError", "StoreCorrupt", "StoreError", "StoreUnavailable", "from_db"]


class StoreError(Exception):
    """Base class of archive storage errors."""


class StoreUnavailable(StoreError):
    """The backend is unreachable or timed out; the operation may be retried. Nothing was acknowledged."""


class StoreCorrupt(StoreError):
    """Stored data failed an integrity check (e.g. a row whose RLP no longer hashes to its key)."""


class SchemaError(StoreError):
    """The schema is missing, from a newer version of Mailmesh, or a migration failed."""


def from_db(err: DbError) -> StoreError:
    """The archive error for an error of the shared database plumbing (raise it ``from err``).

    Same message, same meaning: unavailable stays retryable (:class:`StoreUnavailable`), a corrupt file is
    :class:`StoreCorrupt`, a schema problem :class:`SchemaError`, anything else :class:`StoreError`.
    """
    if isinstance(err, DbUnavailable):
        return StoreUnavailable(str(err))
    if isinstance(err, DbCorrupt):
        return StoreCorrupt(str(err))
    if isinstance(err, DbSchemaError):
        return SchemaError(str(err))
    return StoreError(str(err))
