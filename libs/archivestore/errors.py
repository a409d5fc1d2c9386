"""Errors raised by archive storage adapters.

::

    StoreError
    ├── StoreUnavailable   the backend cannot be reached or timed out (retryable; nothing was acknowledged)
    ├── StoreCorrupt       stored data failed an integrity check
    └── SchemaError        the schema is missing, newer than this code, or a migration failed
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of archive storage errors."""


class StoreUnavailable(StoreError):
    """The backend is unreachable or timed out; the operation may be retried. Nothing was acknowledged."""


class StoreCorrupt(StoreError):
    """Stored data failed an integrity check (e.g. a row whose RLP no longer hashes to its key)."""


class SchemaError(StoreError):
    """The schema is missing, from a newer version of Mailmesh, or a migration failed."""
