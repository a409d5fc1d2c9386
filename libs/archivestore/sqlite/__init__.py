"""The SQLite backend: one file, WAL, ``synchronous=FULL`` (docs/archive.md "SQLite").

Module map:

- :mod:`~archivestore.sqlite.store` — :class:`SqliteStore`: arguments, retention, rows to protocol types;
- :mod:`~archivestore.sqlite.schema` — tables and migrations;
- :mod:`~archivestore.sqlite.statements` — query text and the plans chosen;
- :mod:`~archivestore.sqlite.operations` — the blocking reads and writes;
- :mod:`~archivestore.sqlite.maintenance` — stats, buckets, expiry, the retention cleaner;
- :mod:`~archivestore.sqlite.group_commit` — concurrent puts sharing one transaction.

Threads, connections, backpressure, pragmas and migrations are :mod:`dbkit.sqlite`'s (shared with the
messaging store); :class:`~archivestore.sqlite.store.SqliteStore` turns its errors into the archive's.

Reached through :func:`archivestore.factory.create_store`; only the factory, the archive service and this
backend's own tests import it directly (import-linter contract in pyproject.toml).
"""
