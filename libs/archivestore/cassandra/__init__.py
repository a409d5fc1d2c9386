"""The Cassandra backend (docs/archive.md "Queries on Cassandra", "Cassandra adapter").

Module map:

- :mod:`~archivestore.cassandra.store` — :class:`CassandraStore`: arguments, wiring;
- :mod:`~archivestore.cassandra.schema` — keyspace, tables, migrations;
- :mod:`~archivestore.cassandra.statements` — every CQL statement, prepared once;
- :mod:`~archivestore.cassandra.bridge` — :mod:`dbkit.cassandra`'s bridge, raising the archive's errors;
- :mod:`~archivestore.cassandra.layout` — buckets, days, shards (the shard plan);
- :mod:`~archivestore.cassandra.catalog` — shard plan, erasure and catalogue rows;
- :mod:`~archivestore.cassandra.writes` — ``put``;
- :mod:`~archivestore.cassandra.lookups` — ``get``, ``contains``, the DUPLICATE pre-read;
- :mod:`~archivestore.cassandra.query` — ``query``;
- :mod:`~archivestore.cassandra.maintenance` — partitions, expiry, stats.

Cluster building and the cassandra-driver ⇄ asyncio bridge are :mod:`dbkit.cassandra`'s, shared with the
messaging store. This ``__init__`` imports nothing, so the Spark job's Python workers can import the pure
layout module without loading the driver. Reached through :func:`archivestore.factory.create_store`;
besides the factory and the archive service only the Spark job (which rewrites these tables itself,
docs/spark.md) imports it directly (import-linter contract in pyproject.toml).
"""
