"""sqlite3 for asyncio services: one writer thread, pooled readers, WAL, versioned migrations.

Module map:

- :mod:`~dbkit.sqlite.bridge` — :class:`SqliteBridge`: threads, connections, backpressure;
- :mod:`~dbkit.sqlite.connection` — pragmas of the writer and the readers, sqlite3 → ``DbError`` translation;
- :mod:`~dbkit.sqlite.migrations` — ``Migration``, ``migrate``, ``in_transaction``.

Used by ``archivestore.sqlite`` and ``msgstore.sqlite``, which own their tables; this ``__init__`` imports
nothing.
"""
