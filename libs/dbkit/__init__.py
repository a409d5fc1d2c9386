"""Database plumbing both stores share: connections, threads, migrations, driver errors; no data model.

- :mod:`~dbkit.errors` — ``DbError`` and its subclasses, the only errors this package raises;
- :mod:`dbkit.sqlite` — sqlite3 ⇄ asyncio (one writer thread, pooled readers, bounded write queue), WAL and
  pragmas, WAL checkpoints off the commit path (optional), versioned migrations;
- :mod:`dbkit.cassandra` — cluster building, cassandra-driver ⇄ asyncio with bounded in-flight requests,
  the names the configurations accept and the connection settings both stores embed.

Used by :mod:`archivestore` (the envelope archive) and :mod:`msgstore` (the Messaging API's store); each
translates :class:`~dbkit.errors.DbError` into its own errors at its boundary (``raise X from err``). This
package imports neither store, nor any service, nor the mesh core beyond the configuration helpers its
settings are declared with (import-linter contracts in pyproject.toml), and this
``__init__`` imports nothing, so a SQLite deployment never loads the Cassandra driver.
"""
